"""What ONNX Runtime this is: its package and version, its execution providers, and the OpenVINO release
inside the OpenVINO flavour's EP (``hetero --version`` prints them: a bug report needs them all)."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

from .session import ort

# the ONNX Runtime wheels that install the onnxruntime module (one at a time)
FLAVOURS = ("onnxruntime-openvino", "onnxruntime-gpu", "onnxruntime")
# The oldest default-domain opset every ONNX Runtime release supports (its versioning policy,
# docs/Versioning.md in microsoft/onnxruntime): an op of an older opset runs only where it is the same
# version as in this one (Relu-6 at opset 6 does; Add-6 has no kernel).
OLDEST_OPSET = 7
_OPENVINO_LIBRARY = re.compile(r"libopenvino\.so\.(\d+\.\d+\.\d+)$")


def runtime_versions() -> dict[str, str]:
    """{"onnxruntime": "<version> (<wheel>)", "execution providers": "A, B", and, with the OpenVINO flavour,
    "OpenVINO in the EP": the release its EP was built with; "openvino": the native Python package where
    one is installed too}: read from package metadata and file names, nothing is loaded."""
    wheel = next((name for name in FLAVOURS if _installed(name)), "onnxruntime")
    out = {
        "onnxruntime": f"{ort.__version__} ({wheel})",
        "execution providers": ", ".join(ort.get_available_providers()),
    }
    bundled = sorted(
        found.group(1)
        for path in Path(ort.__file__).parent.joinpath("capi").glob("libopenvino.so.*")
        if (found := _OPENVINO_LIBRARY.search(path.name))
    )
    if bundled:
        out["OpenVINO in the EP"] = bundled[-1]
    if _installed("openvino"):
        out["openvino"] = importlib.metadata.version("openvino") + " (the Python package, native OpenVINO)"
    return out


def installed_release() -> str:
    """The installed onnxruntime module's version ("1.24.1"), whichever flavour's wheel installed it: the
    version the quirk records' ``fixed_in`` is compared with."""
    return ort.__version__


def _installed(name: str) -> bool:
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True
