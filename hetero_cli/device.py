"""Device property keys shaped like ``openvino.device``.

import hetero_cli.device as device
core.compile_model(model, "HETERO", {device.priorities: "OPENVINO,CPU"})
"""

from __future__ import annotations

from .properties import Property

priorities = Property("MULTI_DEVICE_PRIORITIES")
properties = Property("DEVICE_PROPERTIES")
full_name = Property("FULL_DEVICE_NAME")
