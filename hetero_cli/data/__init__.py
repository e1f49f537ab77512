"""What ships inside the package, so the defaults work wherever it is installed (a wheel, not only the
source tree): the default model (a small CNN for handwritten digits, built by models/build_default_model.py),
its class names, and a sample image of a 3. models/ and samples/images/ in the source tree link here."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent

DEFAULT_MODEL = _HERE / "digits.onnx"
"""The embedded default model: input ``image`` [1, 1, 32, 32], output ``probabilities`` [1, 10]."""

DEFAULT_LABELS = _HERE / "digits.labels"
"""Its class names, one a line ("zero" .. "nine"): found beside the model as <model>.labels."""

SAMPLE_IMAGE = _HERE / "digit_3.png"
"""A held-out handwritten 3 the default model classifies as "three"."""
