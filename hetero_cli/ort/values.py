"""ONNX Runtime's C-level values and bindings: OrtValues over numpy memory, IOBindings, and a session run
on OrtValues, as the runtime's inference paths use them.

ORT's Python classes (``onnxruntime.OrtValue``, ``SessionIOBinding``) wrap the C ones of
``onnxruntime.capi._pybind_state`` with a Python layer that costs microseconds per call; an inference of a
small split is a few of those, so the runtime calls the C ones. This module is the one that reaches them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import helper

from ..errors import InferenceError
from .session import ort

_C = ort.capi._pybind_state
# host memory, where every OrtValue over a numpy array lives
CPU = _C.OrtDevice(_C.OrtDevice.cpu(), _C.OrtDevice.default_memory(), 0)
# Passing None makes ORT's binding build default RunOptions on every run (~1.5 us): one, built once, serves all
RUN_OPTIONS = ort.RunOptions()
# ORT's C-level OrtValue: what the runtime's tensors between subgraphs are (isinstance checks)
OrtValue = _C.OrtValue
# from_numpy(array, CPU): an OrtValue over the array's memory, no copy (ORT's C OrtValue does not keep the
# array alive: whoever binds it keeps the array)
from_numpy = _C.OrtValue.ortvalue_from_numpy

# ORT's output type -> ONNX element type, for the types whose buffers are allocated ahead of time
ELEMENT_TYPES = {
    "tensor(float)": 1,
    "tensor(uint8)": 2,
    "tensor(int8)": 3,
    "tensor(uint16)": 4,
    "tensor(int16)": 5,
    "tensor(int32)": 6,
    "tensor(int64)": 7,
    "tensor(bool)": 9,
    "tensor(float16)": 10,
    "tensor(double)": 11,
    "tensor(uint32)": 12,
    "tensor(uint64)": 13,
}
# bytes per element of those types
_ELEMENT_BYTES = {e: np.dtype(helper.tensor_dtype_to_np_dtype(e)).itemsize for e in ELEMENT_TYPES.values()}

Shape = tuple[int, ...]


def as_ort_value(value: Any) -> Any:
    """``value`` as an OrtValue: itself if it is one, else an OrtValue over the numpy array's memory (the
    caller keeps the array while the OrtValue is used)."""
    return value if isinstance(value, OrtValue) else from_numpy(value, CPU)


def nbytes(shape: Shape, element: int) -> int:
    """Bytes of a tensor of ``shape`` and ONNX element type ``element`` (one of ELEMENT_TYPES')."""
    return math.prod(shape) * _ELEMENT_BYTES[element]


def buffer(shape: Shape, element: int, size: int) -> tuple[Any, np.ndarray]:
    """A new OrtValue over ``size`` bytes of numpy memory aligned to 64 bytes (as ORT's allocator aligns),
    and that array (which keeps the memory alive: hold it as long as the OrtValue)."""
    dtype = helper.tensor_dtype_to_np_dtype(element)
    raw = np.empty(size + 64, np.uint8)
    start = -raw.ctypes.data % 64
    array = raw[start : start + size].view(dtype).reshape(shape)
    return from_numpy(array, CPU), array


def c_session(session: ort.InferenceSession) -> Any:
    """The C session inside an InferenceSession (its ``run_with_iobinding`` skips the Python layer)."""
    return session._sess


def io_binding(sess: Any) -> Any:
    """A new C-level IOBinding of C session ``sess`` (c_session): bind_ortvalue_input/_output,
    bind_output(name, CPU) for an output ORT allocates per run, get_outputs, clear_binding_inputs."""
    return _C.SessionIOBinding(sess)


def to_numpy(name: str, value: Any) -> np.ndarray:
    """Output ``name``'s OrtValue as a numpy array; InferenceError for the element types ORT cannot
    convert (the user must cast them in the model)."""
    try:
        return value.numpy()
    except RuntimeError as exc:
        raise InferenceError(
            f"output {name!r} ({value.data_type()}) cannot be handed over as a numpy array: ONNX Runtime's "
            f"Python API has no numpy type for it ({exc}); add a Cast to float32 after it in the model"
        ) from None


def run(
    session: ort.InferenceSession,
    outputs: list[str],
    feeds: dict[str, Any],
    *,
    plain: bool = False,
    placement: Sequence[int | None] = (),
) -> list[Any]:
    """Run ``session`` once on ``feeds`` and return its ``outputs``, as ORT allocates them.

    ``plain``: the feeds and outputs are Python values (numpy arrays, lists, dicts; strings, sequences and
    maps no OrtValue holds), run as InferenceSession.run does; OrtValues among the feeds are read as numpy.
    Else the feeds are OrtValues and so are the outputs: in host memory where ``placement`` is empty, else
    where it says, one per output: a CUDA device id to keep it on, None for host memory (IOBinding).
    Raises what ORT raises.
    """
    if plain:
        given = {t: v.numpy() if isinstance(v, OrtValue) else v for t, v in feeds.items()}
        return session.run(outputs, given, RUN_OPTIONS)
    if not placement:
        # ORT hands outputs it allocates itself over in host memory, whatever the EP (CUDA copies them)
        # index the OrtValueVector: iterating it (list(...)) costs ~10x the run of a small subgraph
        vector = session._sess.run_with_ort_values(feeds, outputs, RUN_OPTIONS)
        return [vector[i] for i in range(len(outputs))]
    binding = session.io_binding()
    for name, value in feeds.items():
        binding.bind_ortvalue_input(name, ort.OrtValue(value))
    for name, device_id in zip(outputs, placement, strict=True):
        if device_id is None:
            binding.bind_output(name, "cpu")
        else:
            binding.bind_output(name, "cuda", device_id)
    session.run_with_iobinding(binding)
    return [v._get_c_value() for v in binding.get_outputs()]
