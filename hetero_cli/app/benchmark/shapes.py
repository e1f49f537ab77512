"""The shapes of the benchmark's input data: benchmark_app's -shape / -data_shape grammar, each input's
concrete shape (dynamic dimensions filled), the size that data takes, and the batch counted as frames.

    shapes, filled = data_shapes(model, shape="[1,1,32,32]", requests=4)
    frames_per_inference = batch_size(shapes)
    unsized = [f.input for f in filled if f.set_to_one]     # dynamic dimensions nothing gave a size
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import BenchmarkError
from ...graph import Model, TensorInfo, activation_peak, refused_shapes, shape_text
from .. import limits
from ..limits import data_bytes, size_text

_SHAPE = re.compile(r"\s*(?:([^\[\],]+?)\s*:?\s*)?\[([^\]]*)\]\s*,?")


def parse_shapes(text: str, input_names: Sequence[str], option: str) -> dict[str, list[int | None]]:
    """``[1,3,224,224]`` (every input) or ``name[1,3,224,224],other[1,4]``: {input: dims (None for ?/-1)}.

    One shape per input: benchmark_app's several shapes for one input (``[1,3,8,8][1,3,4,4]``, or a name
    given twice) would be run one after the other there; hetero-cli refuses them rather than keep the last.
    """
    out: dict[str, list[int | None]] = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _SHAPE.match(text, pos)
        if not m or m.end() == pos:
            raise BenchmarkError(
                f"bad {option} {text!r}: write [1,3,224,224] for every input or name[1,3,224,224],other[1,4]"
            )
        name, dims = m.group(1), _parse_dims(m.group(2), text, option)
        for target in [name.strip()] if name else list(input_names):
            if target not in input_names:
                raise BenchmarkError(
                    f"{option} names unknown input {target!r}: the model's inputs are {', '.join(input_names)}"
                )
            if target in out:
                raise BenchmarkError(
                    f"{option} {text!r} gives input {target!r} more than one shape ({shape_text(out[target])} "
                    f"and {shape_text(dims)}): several shapes per input are not supported: give one"
                )
            out[target] = dims
        pos = m.end()
    return out


def _parse_dims(dims_text: str, text: str, option: str) -> list[int | None]:
    """The dimensions between one pair of brackets (``[]`` is a scalar's): whole numbers, ? or -1 for
    dynamic; an empty one (``[1,,3]``) is refused rather than dropped, which would change the rank."""
    if not dims_text.strip():
        return []
    dims: list[int | None] = []
    for k, part in enumerate(p.strip() for p in dims_text.split(",")):
        if not part:
            raise BenchmarkError(
                f"bad {option} {text!r}: dimension {k} is empty: write a number, or ? (or -1) for a dynamic one"
            )
        if part in ("?", "-1"):
            dims.append(None)
            continue
        if not part.isdigit() or int(part) == 0:
            raise BenchmarkError(
                f"bad {option} {text!r}: dimension {part!r} is not a positive whole number "
                f"(? or -1 leaves it dynamic; dimensions the model fixes, 0 included, need no {option})"
            )
        dims.append(int(part))
    return dims


@dataclass(frozen=True)
class FilledDims:
    """One input whose dynamic dimensions data_shapes filled: ``input`` (its name), ``declared`` (its shape
    as the model gives it, names or None for dynamic dimensions), ``given`` (that shape after -shape, -b and
    -data_shape; ``declared`` where they set nothing), ``shape`` (the concrete shape of its data), the axes
    the input's first -i file sized (``from_file``) and the axes nothing sized, set to 1 (``set_to_one``).
    ``text`` is the note hetero benchmark prints."""

    input: str
    declared: tuple[Any, ...]
    given: tuple[Any, ...]
    shape: tuple[int, ...]
    from_file: tuple[int, ...]
    set_to_one: tuple[int, ...]

    def shown(self) -> str:
        """The input's shape for a message: ``[n,16]``, or ``[n,16] ([n,8] as given)`` where -shape,
        -b or -data_shape set some of its dimensions."""
        text = shape_text(self.declared)
        return text if self.given == self.declared else f"{text} ({shape_text(self.given)} as given)"

    @property
    def text(self) -> str:
        """``input 'x' is [n,16]: dynamic dimensions set to 1 (-data_shape x[1,16] to choose)``."""
        if not self.from_file:
            what = "dynamic dimensions set to 1"
        elif not self.set_to_one:
            what = "dynamic dimensions taken from its first -i file"
        else:
            what = "image dimensions taken from its first image, the others set to 1"
        if self.given != self.declared:
            what = what.replace("dynamic dimensions", "dimensions still dynamic")
        return (
            f"input {self.input!r} is {self.shown()}: {what} (-data_shape {self.input}{shape_text(self.shape)} "
            "to choose)"
        )


def is_fixed(dim: Any) -> bool:
    """Whether a model dimension is fixed: a whole number, 0 included (ONNX Runtime takes dim_value 0 as a
    fixed 0, an empty tensor); names, None and negative values are dynamic."""
    return isinstance(dim, int) and dim >= 0


def data_shapes(
    model: Model,
    shape: str | None = None,
    data_shape: str | None = None,
    requests: int = 1,
    from_images: Mapping[str, Mapping[int, int]] | None = None,
    *,
    batch: int | None = None,
    fill_dynamic: bool = True,
    with_files: Collection[str] = (),
) -> tuple[dict[str, tuple[int, ...]], list[FilledDims]]:
    """The concrete shape of every input's data, and what was filled in each input with dynamic dimensions
    (FilledDims, in the model's input order; its ``text`` the note to print).

    ``shape`` (-shape) fills the model's dynamic dimensions (hetero-cli does not reshape static ones);
    ``batch`` (-b) sets dimension 0 of every input of rank >= 2 as -shape would; ``data_shape``
    (-data_shape) gives the data's shape, which must fit the model's and -shape's. ``from_images``
    ({input: {axis: size}}, from data_dims()) fills the dimensions still dynamic that the input's first
    -i file gives (an image's channels, height and width; a .npy file's every axis). Other dynamic
    dimensions are 1 where ``fill_dynamic`` is on or the input is in ``with_files`` (its -i files hold one
    sample each); else BenchmarkError, as benchmark_app's "Input ... is dynamic. Provide data shapes!".
    BenchmarkError too where the shapes give a named dimension two sizes no node can take (refused_shapes),
    or if ``requests`` sets of that data (one per infer request) would not fit in memory.
    """
    wanted = _wanted(model, shape, batch, data_shape)
    out: dict[str, tuple[int, ...]] = {}
    filled: list[FilledDims] = []
    for info in model.inputs:
        dims = _given(info, wanted)
        if dims is None:
            raise BenchmarkError(
                f"the model's input {info.name!r} has no known shape: give it with -data_shape {info.name}[...]"
            )
        from_file = (from_images or {}).get(info.name, {})
        if not fill_dynamic and info.name not in with_files:
            _check_static(info, dims, from_file)
        out[info.name], note = _concrete(info, dims, from_file)
        filled += [note] if note else []
    refused = refused_shapes(model, out)
    if refused:  # no node can take them: ORT would fail the first inference, after the compile
        raise BenchmarkError(f"{refused} (-shape, -data_shape or -i)")
    check_data_size(model, out, requests)
    return out, filled


def input_dims(
    model: Model, shape: str | None = None, data_shape: str | None = None
) -> dict[str, tuple[Any, ...]]:
    """{input: its shape with the dynamic dimensions -shape and -data_shape set} for each input whose shape
    they change (? or -1 leaves a dimension dynamic); what ``hetero compile`` fixes in the model it
    exports. BenchmarkError as data_shapes for a bad option, another rank, or a value against a fixed
    dimension."""
    wanted = _wanted(model, shape, None, data_shape)
    out: dict[str, tuple[Any, ...]] = {}
    for info in model.inputs:
        dims = _given(info, wanted)
        if dims is not None and (info.shape is None or tuple(dims) != tuple(info.shape)):
            out[info.name] = tuple(dims)
    return out


def _wanted(
    model: Model, shape: str | None, batch: int | None, data_shape: str | None
) -> list[tuple[str, dict[str, list[int | None]]]]:
    """(option, {input: dims}) for -shape, -b and -data_shape, in the order they apply."""
    names = [i.name for i in model.inputs]
    batched = {
        i.name: [batch] + [None] * (len(i.shape) - 1)
        for i in model.inputs
        if batch is not None and i.shape is not None and len(i.shape) >= 2
    }
    return [
        ("-shape", parse_shapes(shape, names, "-shape") if shape else {}),
        ("-b", batched),
        ("-data_shape", parse_shapes(data_shape, names, "-data_shape") if data_shape else {}),
    ]


def _given(
    info: TensorInfo, wanted: Sequence[tuple[str, Mapping[str, Sequence[int | None]]]]
) -> list[Any] | None:
    """The input's shape with what ``wanted``'s options give it (_merge_dims); None where neither the model
    nor an option gives its rank."""
    dims = list(info.shape) if info.shape is not None else None
    set_by: list[str | None] = [None] * len(dims or ())
    for option, given in wanted:
        if info.name in given:
            dims, set_by = _merge_dims(info, dims, set_by, given[info.name], option)
    return dims


def _check_static(info: TensorInfo, dims: Sequence[Any], from_file: Mapping[int, int]) -> None:
    """benchmark_app's refusal of a dynamic input without data shapes: BenchmarkError where a dimension of
    ``dims`` is still dynamic and no -i file gives it."""
    left = [k for k, d in enumerate(dims) if not is_fixed(d) and k not in from_file]
    if not left:
        return
    example = shape_text([from_file.get(k, 1) if not is_fixed(d) else d for k, d in enumerate(dims)])
    raise BenchmarkError(
        f"Input {info.name!r} is dynamic ({shape_text(info.shape or dims)}). Provide data shapes! Give "
        f"-shape or -data_shape {info.name}{example} (or -b for the batch), -i {info.name}:FILE, or "
        f"--fill-dynamic to set its dynamic dimensions to 1"
    )


def _merge_dims(
    info: TensorInfo,
    dims: list[Any] | None,
    set_by: list[str | None],
    given: Sequence[int | None],
    option: str,
) -> tuple[list[Any], list[str | None]]:
    """``dims`` with ``given`` (from ``option``) in its dynamic dimensions, and which option set each
    dimension (None: the model). A given dimension that differs from a fixed one is refused, blaming
    whoever fixed it: the model (hetero-cli does not reshape models) or -shape."""
    if dims is None:  # the model gives no rank: the option gives it
        dims, set_by = [None] * len(given), [None] * len(given)
    if len(given) != len(dims):
        raise BenchmarkError(
            f"{option} gives {info.name!r} rank {len(given)} but the model's input is "
            f"{shape_text(dims)} (rank {len(dims)}): give {len(dims)} dimensions"
        )
    merged, by = [], []
    for k, (want, have, setter) in enumerate(zip(given, dims, set_by, strict=True)):
        if want is not None and is_fixed(have) and want != have:
            if setter is not None:
                leave = f"leave {setter} out" if setter == "-b" else f"? in {setter}"
                raise BenchmarkError(
                    f"{option} gives {info.name!r} {shape_text(given)} but {setter} set dimension {k} of it to "
                    f"{have} (the model's input is {shape_text(info.shape)}): give the same value in both, or "
                    f"{leave} to leave it to {option}"
                )
            raise BenchmarkError(
                f"{option} gives {info.name!r} {shape_text(given)} but dimension {k} of the model's input "
                f"{shape_text(info.shape)} is fixed at {have}: hetero-cli does not reshape models; only dynamic "
                f"dimensions can be set"
            )
        merged.append(want if want is not None else have)
        by.append(option if want is not None and not is_fixed(have) else setter)
    return merged, by


def _concrete(
    info: TensorInfo, dims: Sequence[Any], from_file: Mapping[int, int]
) -> tuple[tuple[int, ...], FilledDims | None]:
    """``dims`` with their dynamic dimensions filled: from the input's first -i file where it gives them
    (``from_file``: {axis: size}), else 1; and what was filled (None if nothing was)."""
    dynamic = [k for k, d in enumerate(dims) if not is_fixed(d)]
    if not dynamic:
        return tuple(dims), None
    concrete = tuple(from_file.get(k, 1) if k in dynamic else d for k, d in enumerate(dims))
    declared = tuple(info.shape) if info.shape is not None else tuple(dims)
    return concrete, FilledDims(
        input=info.name,
        declared=declared,
        given=tuple(dims),
        shape=concrete,
        from_file=tuple(k for k in dynamic if k in from_file),
        set_to_one=tuple(k for k in dynamic if k not in from_file),
    )


def element_type(info: TensorInfo) -> np.dtype:
    """The element type of an input's data (float32 where the model does not say)."""
    return np.dtype(info.dtype) if info.dtype is not None else np.dtype(np.float32)


def _smaller(info: TensorInfo) -> str:
    """What makes an input's data smaller: the options where it has dynamic dimensions, else another model."""
    if info.shape is None or not all(is_fixed(d) for d in info.shape):
        return "give a smaller -shape or -data_shape"
    return (
        f"its shape {shape_text(info.shape)} is fixed in the model (hetero-cli does not reshape models): "
        f"use a model with a smaller input"
    )


def check_data_size(model: Model, shapes: Mapping[str, Sequence[int]], count: int = 1) -> None:
    """BenchmarkError, before anything is allocated, if the inputs' data (``count`` sets of it, one per infer
    request), or that data and the tensors one inference makes at these shapes (graph.activation_peak:
    the most alive at once), would not fit in memory (limits.over_limit)."""
    infos = [i for i in model.inputs if i.name in shapes]
    sizes = {i.name: data_bytes(element_type(i), shapes[i.name]) for i in infos}
    for info in infos:
        over = limits.over_limit(sizes[info.name])
        if over is not None:
            raise BenchmarkError(
                f"input {info.name!r} data {shape_text(shapes[info.name])} {element_type(info)} would take "
                f"{size_text(sizes[info.name])}, {over}: {_smaller(info)}"
            )
    total = sum(sizes.values())
    over = limits.over_limit(total)
    if over is not None:
        parts = ", ".join(f"{n} {size_text(b)}" for n, b in sizes.items())
        raise BenchmarkError(
            f"the inputs' data would take {size_text(total)} together ({parts}), {over}: "
            f"give a smaller -shape or -data_shape"
        )
    over = limits.over_limit(total * count)
    if over is not None:
        raise BenchmarkError(
            f"the data for {count} infer requests would take {count} x {size_text(total)} = "
            f"{size_text(total * count)}, {over}: give fewer requests (-nireq) or a smaller -shape "
            f"or -data_shape"
        )
    peak = activation_peak(model, shapes)
    over = limits.over_limit(total * count + peak)
    if over is not None:
        fixed = all(info.shape is not None and all(is_fixed(d) for d in info.shape) for info in infos)
        raise BenchmarkError(
            f"one inference at these shapes makes about {size_text(peak)} of tensors alive at once "
            f"(estimated from the model's shapes), {size_text(total * count + peak)} with the input data, "
            f"{over}: "
            + ("use a model with smaller inputs" if fixed else "give a smaller -b, -shape or -data_shape")
        )


def batch_size(shapes: Mapping[str, Sequence[int]]) -> int:
    """The batch (first dimension of the first input of rank >= 2), as benchmark_app counts frames."""
    for dims in shapes.values():
        if len(dims) >= 2:
            return int(dims[0])
    return 1
