"""Hint property keys shaped like ``openvino.hint``.

import hetero_cli.hint as hints
core.set_property("CPU", {hints.inference_precision: hetero_cli.Type.f32})
"""

from __future__ import annotations

from .properties import Property

inference_precision = Property("INFERENCE_PRECISION_HINT")
