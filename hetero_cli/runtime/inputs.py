"""What a caller gives an inference, as the feeds it runs on: a dict (by name, port or index), a list in
input order or one array, checked against the model's inputs (names, dtypes, shapes) and converted where
ONNX Runtime takes another form (numpy strings as str objects)."""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InferenceError
from ..graph import Model, TensorInfo, disagreement, refused_shapes, shape_text
from ..ort.values import Shape
from .results import port_name

# refuse_conflicts' verdicts an Inputs keeps (each one took onnx's shape inference, tens of ms on big models)
VERDICTS = 256


class Inputs:
    """A compiled model's ``inputs`` (TensorInfo, in order), and the checks a caller's values pass before
    an inference runs; ``model``: the model compiled (its overridable initializers and types);
    ``symbols``: inputs whose named dimensions disagree where no node can take them are refused before
    a run (refuse_conflicts), and empty outputs are explained by them (explain_empty)."""

    def __init__(self, inputs: Sequence[TensorInfo], model: Model, *, symbols: bool = False):
        self.tensors: dict[str, TensorInfo] = {i.name: i for i in inputs}
        self.symbols = symbols
        self._model = model
        # refuse_conflicts' verdicts: sorted (input, shape) pairs -> why such inputs are refused (None: they
        # are not); the oldest goes past VERDICTS (a model served at ever-new disagreeing shapes)
        self._conflicts: OrderedDict[tuple[tuple[str, Shape], ...], str | None] = OrderedDict()
        # what a value fed for an overridable initializer must be: the initializer's own type and shape
        self.overridable: dict[str, TensorInfo] = {
            t: model.tensor_info(t) for t in model.overridable_initializers
        }
        # (dtype, shape, C-order strides) of inputs whose every dimension is fixed: an array with exactly
        # these is accepted at a glance
        self.exact: dict[str, tuple[np.dtype, Shape, Shape]] = {
            i.name: (i.dtype, tuple(i.shape), c_strides(i.shape, i.dtype.itemsize))
            for i in inputs
            if i.dtype is not None
            and not i.dtype.hasobject  # strings: no OrtValue holds them, the straight path cannot bind them
            and numpy_native(i.dtype)  # bfloat16 and the like: refused by _check_tensor
            and i.shape is not None
            and all(isinstance(d, int) and d > 0 for d in i.shape)
        }
        # sequence, map and optional inputs: handed to ORT as given (lists, dicts), as its run() takes them
        self.non_tensor = frozenset(
            i.name
            for i in inputs
            if (t := model.value_type(i.name)) is not None and not t.HasField("tensor_type")
        )
        # inputs no OrtValue can hold (those and strings): kept as given, for the plain steps that read them
        self.unwrapped = self.non_tensor | {
            i.name for i in (*inputs, *self.overridable.values()) if i.dtype is not None and i.dtype.hasobject
        }
        self.names = frozenset(self.tensors)
        # what the caller feeds (checked before a run): a session refusing one of these is no relax's business
        self.fed_by_caller = self.names | frozenset(self.overridable)

    def feeds(self, inputs: Any) -> dict[str, np.ndarray]:
        """The checked inputs, in a dict of the request's own (the caller may change theirs while it runs).
        Raises InferenceError, as ``check`` does."""
        exact = self.exact_feeds(inputs)
        return dict(exact) if exact is not None else self.check(self.as_dict(inputs))

    def exact_feeds(self, inputs: Any) -> dict[str, np.ndarray] | None:
        """``inputs`` itself if it is a dict of exactly the static inputs' arrays (the serving case: dtype,
        shape and C strides the input's own, nothing more to check), else None."""
        exact = self.exact
        if type(inputs) is not dict or not len(inputs) == len(exact) == len(self.tensors):
            return None
        for name, value in inputs.items():
            want = exact.get(name)
            if (
                want is None
                or type(value) is not np.ndarray
                or value.dtype != want[0]
                or value.shape != want[1]
                or value.strides != want[2]
            ):
                return None
        return inputs

    def as_dict(self, inputs: Any) -> dict[str, Any]:
        """``inputs`` (a dict keyed by name, port or index, a list in input order, one array, or None) as
        {name: value}, unchecked; InferenceError for a count or a form that does not fit the model."""
        names = list(self.tensors)
        if inputs is None:
            return {}
        if isinstance(inputs, Mapping):
            given: dict[str, Any] = {}
            for key, value in inputs.items():
                name = _input_name(key, names)
                if name in given:
                    raise InferenceError(f"input {name!r} given twice (by name, port or index): give it once")
                given[name] = value
            return given
        if isinstance(inputs, np.ndarray) or np.isscalar(inputs):
            if len(names) != 1:
                raise InferenceError(
                    f"one array given but the model has {len(names)} inputs: {', '.join(names)}"
                )
            return {names[0]: inputs}
        if isinstance(inputs, Sequence):
            if len(inputs) != len(names):
                raise InferenceError(
                    f"{len(inputs)} inputs given but the model takes {len(names)}: {', '.join(names)}"
                )
            return dict(zip(names, inputs, strict=True))
        raise InferenceError(
            f"inputs must be a dict of name -> array, a list or an array, not {type(inputs).__name__}"
        )

    def check(self, given: dict[str, Any]) -> dict[str, np.ndarray]:
        """``given`` ({name: value}) as the feeds: C-ordered numpy arrays of each input's dtype and shape
        (sequences and maps as given); InferenceError for an unknown or missing input, a value that is not
        an array, or a dtype or shape the model does not take."""
        unknown = [k for k in given if k not in self.tensors and k not in self.overridable]
        if unknown:
            raise InferenceError(
                f"unknown input(s) {', '.join(map(repr, unknown))}: the model's inputs are "
                f"{', '.join(self.tensors) or 'none'}"
            )
        missing = [k for k in self.tensors if k not in given]
        if missing:
            raise InferenceError(f"missing input(s) {', '.join(map(repr, missing))}: give a value for each")
        out = {}
        for name, value in given.items():
            if name in self.non_tensor:
                out[name] = value
                continue
            try:
                arr = np.asarray(value, order="C")
            except (ValueError, TypeError) as exc:
                text = str(exc).strip().splitlines()
                raise InferenceError(
                    f"input {name!r} is not an array ({text[0][:150] if text else type(exc).__name__}): give a "
                    "numpy array of the input's shape"
                ) from None
            info = self.tensors.get(name) or self.overridable.get(name)
            if info is not None and info.dtype == np.dtype(object) and arr.dtype.kind in "USO":
                arr = _as_text(name, arr)
            if info is not None:
                _check_tensor(name, arr, info.dtype, info.shape)
            out[name] = arr
        if self.symbols:
            self.refuse_conflicts(out)
        return out

    def explain_empty(self, feeds: Mapping[str, Any], results: Mapping[str, Any]) -> None:
        """Where ``symbols``: InferenceError where an inference's outputs came out empty and its ``feeds``
        give one named dimension two sizes: OpenVINO's one-thread CPU runs answer inputs they cannot
        broadcast so instead of failing (quirk openvino-one-thread-empty-outputs), where refuse_conflicts
        could not tell beforehand. Inputs whose named dimensions disagree with outputs that are not empty
        pass (models reuse names loosely: a recurrent state's "height" a quarter of the image's)."""
        if self.symbols and any(isinstance(v, np.ndarray) and v.size == 0 for v in results.values()):
            found = disagreement(self.tensors.values(), self._shapes(feeds))
            if found is not None:
                raise InferenceError(found[0])

    def refuse_conflicts(self, feeds: Mapping[str, Any]) -> None:
        """Where ``symbols``, before any session runs: InferenceError where ``feeds`` give one named
        dimension two sizes and onnx's strict shape inference fails at their shapes but passes with the
        sizes made to agree (a node cannot take them). Such a run of a one-thread OpenVINO session answers
        with empty outputs (quirk openvino-one-thread-empty-outputs) and left the process to crash in a
        later inference (docs/limits.md); loosely named models pass (their shapes infer). One verdict per
        set of input shapes, for the latest VERDICTS sets."""
        shapes = self._shapes(feeds)
        if disagreement(self.tensors.values(), shapes) is None:
            return
        key = tuple(sorted(shapes.items()))
        message = self._conflicts.get(key, "")
        if message == "":
            message = refused_shapes(self._model, shapes)
            if len(self._conflicts) >= VERDICTS:
                self._conflicts.popitem(last=False)  # one at a time: atomic, requests share it
            self._conflicts[key] = message
        if message:
            raise InferenceError(message)

    def _shapes(self, feeds: Mapping[str, Any]) -> dict[str, Shape]:
        """The shapes of the arrays in ``feeds`` for this model's inputs."""
        return {
            n: tuple(v.shape) for n, v in feeds.items() if n in self.tensors and isinstance(v, np.ndarray)
        }

    def owned(self, inputs: Any, share: bool) -> dict[str, Any]:
        """start_async's feeds: checked as ``feeds`` does and, unless ``share``, copies the caller can no
        longer change (as OpenVINO's start_async copies them)."""
        exact = self.exact_feeds(inputs)
        given = exact if exact is not None else self.as_dict(inputs)
        feeds = dict(exact) if exact is not None else self.check(given)
        if share:
            return feeds
        return {name: _own(value, given.get(name)) for name, value in feeds.items()}


def _as_text(name: str, arr: np.ndarray) -> np.ndarray:
    """A string input's array as ORT takes it: an object array of str. Bytes (numpy's fixed-width ones, or
    bytes objects, as KServe's BYTES arrive) are decoded as UTF-8, since ORT would feed a bytes object's
    repr ("b'...'"); InferenceError for bytes that are no UTF-8 and for str that UTF-8 cannot hold (a lone
    surrogate, which ORT fails on). Other objects are left to ORT, which takes their str()."""
    texts = arr.astype(object) if arr.dtype.kind in "US" else arr
    if not any(isinstance(v, bytes) or (isinstance(v, str) and not v.isascii()) for v in texts.flat):
        return texts  # ASCII text (or no text at all): as ORT takes it, no copy
    decoded = np.empty(arr.shape, object)
    for index, value in np.ndenumerate(texts):
        decoded[index] = _text(name, value)
    return decoded


def _text(name: str, value: Any) -> Any:
    """One element of string input ``name`` as ORT takes it (_as_text)."""
    try:
        if isinstance(value, bytes):
            return value.decode("utf-8")
        if isinstance(value, str):
            value.encode("utf-8")
    except UnicodeError as exc:
        raise InferenceError(
            f"input {name!r} holds a string that is no UTF-8 text ({exc.reason} at position {exc.start}): ONNX "
            "strings are UTF-8, give text"
        ) from None
    return value


def _input_name(key: Any, names: Sequence[str]) -> str:
    """An infer() key as an input's name: a name, a port (compiled.inputs[0]) or an input index; anything
    else as its text, which the unknown-input check then names."""
    name = port_name(key, names)
    return name if name is not None else str(key)


def unfeedable(name: str, dtype: np.dtype | None) -> str | None:
    """Why no caller can feed the input ``name`` of ``dtype`` (a message), None where one can: a type ONNX
    Runtime's Python API cannot take from numpy (bfloat16, float8, int4: numpy_native). A command that
    feeds the model refuses it before reading any data; an inference refuses it (InferenceError)."""
    if dtype is None or numpy_native(dtype):
        return None
    return (
        f"input {name!r} is {dtype}, which ONNX Runtime's Python API cannot take from numpy: give the "
        f"model a float32 (or other numpy type) input and a Cast to {dtype} inside it"
    )


def _check_tensor(name: str, arr: np.ndarray, dtype: np.dtype | None, shape: Any) -> None:
    reason = unfeedable(name, dtype)
    if reason:
        raise InferenceError(reason)
    if dtype is not None and arr.dtype != dtype:
        if dtype == np.dtype(object):
            raise InferenceError(
                f"input {name!r} has dtype {arr.dtype} but the model takes strings: give a numpy array of "
                "str objects, e.g. numpy.array(value, dtype=object)"
            )
        raise InferenceError(
            f"input {name!r} has dtype {arr.dtype} but the model takes {dtype}: convert it, "
            f"e.g. value.astype(numpy.{dtype})"
        )
    if shape is None:
        return
    if arr.ndim != len(shape):
        raise InferenceError(
            f"input {name!r} has shape {shape_text(arr.shape)} but the model takes rank {len(shape)} "
            f"{shape_text(shape)}: reshape it"
        )
    for got, want in zip(arr.shape, shape, strict=True):
        if isinstance(want, int) and want >= 0 and got != want:  # ORT holds a 0 dimension fixed, too
            raise InferenceError(
                f"input {name!r} has shape {shape_text(arr.shape)} but the model takes {shape_text(shape)}: "
                "resize or reshape it"
            )


def _own(value: Any, given: Any) -> Any:
    """A start_async input the caller can no longer change: ``value`` as checked from the caller's
    ``given``; an array converted from the caller's array (another dtype or layout) is already a copy,
    anything else is copied (arrays) or copied deeply (sequences, maps)."""
    if isinstance(value, np.ndarray):
        return value if value is not given and isinstance(given, np.ndarray) else value.copy()
    return copy.deepcopy(value)


def numpy_native(dtype: np.dtype) -> bool:
    """Whether ORT's Python API converts ``dtype`` to and from numpy: numpy's own types, not the ml_dtypes
    ones onnx names bfloat16, float8 and int4 by (ORT refuses those arrays with a RuntimeError)."""
    return dtype.type.__module__ == "numpy"


def c_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """The strides of a C-contiguous array of ``shape`` (what numpy gives a fresh array)."""
    strides = []
    step = itemsize
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    return tuple(reversed(strides))
