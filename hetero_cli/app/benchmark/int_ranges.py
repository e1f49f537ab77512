"""The ranges random integer inputs are drawn from: values the model can take.

    ranges = integer_ranges(model, {"ids": (0, 99)})     # {input: IntRange}, the given ones first
    for name, r in ranges.items(): print(name, r.low, r.high, r.why)

An integer input that is (through ops that pass its values on unchanged: Cast, Reshape, Unsqueeze,
Squeeze, Flatten, Expand, Identity, Transpose, Concat, Slice...) the indices of a Gather, GatherElements,
GatherND, ScatterElements, ScatterND or EmbedLayerNormalization stays within the size of the data it
indexes (a token-type id within the two rows of its embedding); a mask (an input named like one, or one
cast to bool or used as a Where condition) is all ones; any other integer input takes 0..9 (uint8 0..255,
as image data), a boolean either value. ``--int-range NAME:LO,HI`` (parse_int_ranges) sets one by hand.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import onnx

from ...errors import BenchmarkError
from ...graph import Model, Node, type_shape

#: the range of an integer input nothing bounds, and of uint8 data (images)
DEFAULT_RANGE = (0, 9)
UINT8_RANGE = (0, 255)

#: ops whose outputs hold (some of) the values of these inputs, unchanged (None: every input)
PASS_ON: dict[str, tuple[int, ...] | None] = {
    "Cast": (0,),
    "CastLike": (0,),
    "Identity": (0,),
    "Reshape": (0,),
    "Unsqueeze": (0,),
    "Squeeze": (0,),
    "Flatten": (0,),
    "Expand": (0,),
    "Transpose": (0,),
    "Tile": (0,),
    "Slice": (0,),
    "Split": (0,),
    "Concat": None,
    "Gather": (0,),
    "GatherElements": (0,),
    "GatherND": (0,),
    "Compress": (0,),
    "ReverseSequence": (0,),
    "Where": (1, 2),
}


class Indexing(NamedTuple):
    """How an op's input indexes another: the position of the ``data`` it indexes, the attribute naming the
    axis (None: none, ``axis`` is the one) and its default; ``tuples``: GatherND's and ScatterND's index
    tuples, which span the axes after ``batch_dims``."""

    data: int
    attribute: str | None = "axis"
    axis: int = 0
    tuples: bool = False


#: (domain, op) -> {position of the indices: Indexing}
INDEXING: dict[tuple[str, str], dict[int, Indexing]] = {
    ("", "Gather"): {1: Indexing(0)},
    ("", "GatherElements"): {1: Indexing(0)},
    ("", "ScatterElements"): {1: Indexing(0)},
    ("", "GatherND"): {1: Indexing(0, None, tuples=True)},
    ("", "ScatterND"): {1: Indexing(0, None, tuples=True)},
    # ORT's fused BERT embedding: input_ids, segment_ids and position_ids index their embeddings' rows
    ("com.microsoft", "EmbedLayerNormalization"): {
        0: Indexing(2, None),
        1: Indexing(4, None),
        8: Indexing(3, None),
    },
}

#: (domain, op) -> positions whose values are a mask (where True keeps, False drops)
MASKING: dict[tuple[str, str], tuple[int, ...]] = {
    ("", "Where"): (0,),
    ("", "And"): (0, 1),
    ("", "Or"): (0, 1),
    ("", "Xor"): (0, 1),
    ("", "Not"): (0,),
    ("com.microsoft", "EmbedLayerNormalization"): (7,),
    ("com.microsoft", "Attention"): (3,),
}


@dataclass(frozen=True)
class IntRange:
    """The values (``low`` to ``high``, both included) an input's random integers are drawn from, and
    ``why`` (what bounds them, for the line the commands print)."""

    low: int
    high: int
    why: str


def is_integer_kind(dtype: np.dtype | None) -> bool:
    """Whether random data of this type is integers (booleans included): what an IntRange is for."""
    return dtype is not None and (dtype == np.bool_ or np.issubdtype(dtype, np.integer))


def integer_ranges(model: Model, given: Mapping[str, tuple[int, int]] | None = None) -> dict[str, IntRange]:
    """{input: IntRange} for each integer or boolean input of ``model``: ``given`` ({input: (low, high)},
    checked by check_int_ranges) where it names one, else what the graph bounds it to (see the module).

    Raises BenchmarkError for a bad ``given`` (check_int_ranges)."""
    given = dict(given or {})
    check_int_ranges(model, given)
    out: dict[str, IntRange] = {}
    for info in model.inputs:
        if not is_integer_kind(info.dtype):
            continue
        if info.name in given:
            out[info.name] = _given(model, info.name, *given[info.name])
            continue
        out[info.name] = _inferred(model, info.name, np.dtype(info.dtype))
    return out


def _given(model: Model, name: str, low: int, high: int) -> IntRange:
    """A range given for input ``name``; its ``why`` says where it goes beyond the data the input indexes
    (allowed: a user may mean to try that, but the CPU EP then fails and OpenVINO reads garbage)."""
    bound, where = _index_bound(model, name)
    if bound is not None and (low < -bound or high >= bound):
        return IntRange(int(low), int(high), f"given; beyond 0..{bound - 1}: it {where}")
    return IntRange(int(low), int(high), "given")


def range_text(dtype: np.dtype | None, r: IntRange) -> str:
    """``integers in [0, 1] (...)``: what the commands print of an input's random integers (booleans)."""
    kind = "booleans" if dtype == np.bool_ else "integers"
    return f"{kind} in [{r.low}, {r.high}] ({r.why})"


def check_int_ranges(model: Model, given: Mapping[str, tuple[int, int]], *, option: bool = False) -> None:
    """BenchmarkError for a range ``given`` ({input: (low, high)}) names an input the model lacks, or one
    that takes no integers, or whose low is over its high, or that its input's type cannot hold; the
    message names the range as --int-range NAME:LO,HI where ``option``, else as ``int_ranges[NAME]``."""
    infos = {i.name: i for i in model.inputs}
    integer = [n for n, i in infos.items() if is_integer_kind(i.dtype)]
    listed = ", ".join(integer) if integer else "none"
    for name, bounds in given.items():
        what = f"int_ranges[{name!r}]"
        low, high = _two_ints(bounds, what)
        if option:
            what = f"--int-range {name}:{low},{high}"
        if name not in infos:
            raise BenchmarkError(
                f"{what}: {name!r} is not an input of the model; its integer inputs: {listed}"
            )
        dtype = infos[name].dtype
        if not is_integer_kind(dtype):
            raise BenchmarkError(
                f"{what}: input {name!r} takes {dtype}, not integers: the ranges are for the integer inputs "
                f"({listed})"
            )
        if low > high:
            raise BenchmarkError(f"{what}: LO {low} is over HI {high}: give the smaller first")
        lo, hi = _type_range(np.dtype(dtype))
        if low < lo or high > hi:
            raise BenchmarkError(
                f"{what}: input {name!r} is {dtype}, which holds {lo}..{hi}: give a range within it"
            )


def _two_ints(bounds: object, what: str) -> tuple[int, int]:
    """``bounds`` as (low, high) ints; BenchmarkError for anything else."""
    if not (isinstance(bounds, tuple | list) and len(bounds) == 2):
        raise BenchmarkError(f"{what}: {bounds!r} is no (LO, HI) pair of integers")
    if not all(isinstance(b, int | np.integer) and not isinstance(b, bool) for b in bounds):
        raise BenchmarkError(f"{what}: {bounds!r} is no (LO, HI) pair of integers")
    return int(bounds[0]), int(bounds[1])


def parse_int_ranges(values: Sequence[str], model: Model) -> dict[str, tuple[int, int]]:
    """--int-range values (``NAME:LO,HI``, repeatable; ``LO,HI`` alone where the model has one integer
    input) as {input: (low, high)}, a later value for an input winning. BenchmarkError for a value of
    another form, or one check_int_ranges refuses."""
    integer = [i.name for i in model.inputs if is_integer_kind(i.dtype)]
    out: dict[str, tuple[int, int]] = {}
    for value in values:
        name, sep, text = value.rpartition(":")
        if not sep and len(integer) == 1:
            name = integer[0]
        bounds = _ints(text)
        if not name or bounds is None:
            example = name or (integer[0] if integer else "NAME")
            raise BenchmarkError(
                f"--int-range {value!r}: write NAME:LO,HI with two integers, LO <= HI "
                f"(e.g. --int-range {example}:0,1)"
            )
        check_int_ranges(model, {name: bounds}, option=True)
        out[name] = bounds
    return out


def _ints(text: str) -> tuple[int, int] | None:
    """``LO,HI`` as two ints, or None."""
    parts = text.split(",")
    try:
        return (int(parts[0]), int(parts[1])) if len(parts) == 2 else None
    except ValueError:
        return None


def _type_range(dtype: np.dtype) -> tuple[int, int]:
    """The values an integer (or boolean) type holds."""
    if dtype == np.bool_:
        return 0, 1
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _inferred(model: Model, name: str, dtype: np.dtype) -> IntRange:
    """The range of input ``name`` from the graph: the data its values index, a mask, else the default."""
    bound, where = _index_bound(model, name)
    mask = _mask_reason(model, name)
    lo, hi = _type_range(dtype)
    if bound is not None:
        high = min(bound - 1, hi)
        if mask and high >= 1:
            return IntRange(1, 1, f"all ones: {mask}, and {where}")
        return IntRange(0, high, where)
    if mask:
        return IntRange(1, 1, f"all ones: {mask}")
    if dtype == np.bool_:
        return IntRange(0, 1, "either value")
    low, high = UINT8_RANGE if dtype == np.uint8 else DEFAULT_RANGE
    return IntRange(max(low, lo), min(high, hi), "the default: nothing in the graph bounds it")


def _reached(model: Model, name: str) -> Iterator[tuple[Node, int, str]]:
    """(node, input position, tensor) for each place the values of input ``name`` are read, following
    them through the ops that pass them on unchanged (PASS_ON)."""
    consumers = model.consumers()
    seen = {name}
    todo = [name]
    while todo:
        tensor = todo.pop()
        for node in consumers.get(tensor, ()):
            for pos, read in enumerate(node.proto.input):
                if read != tensor:
                    continue
                yield node, pos, tensor
                passing = PASS_ON.get(_key(node)[1], ()) if _key(node)[0] == "" else ()
                if passing is None or pos in passing:
                    fresh = [o for o in node.outputs if o not in seen]
                    seen.update(fresh)
                    todo.extend(fresh)


def _key(node: Node) -> tuple[str, str]:
    domain = node.proto.domain
    return ("" if domain == "ai.onnx" else domain, node.proto.op_type)


def _index_bound(model: Model, name: str) -> tuple[int | None, str]:
    """The smallest size the values of input ``name`` index (None where they index nothing of known
    size), and the words that say where it comes from."""
    best: int | None = None
    where = ""
    for node, pos, tensor in _reached(model, name):
        spec = INDEXING.get(_key(node), {}).get(pos)
        if spec is None or len(node.proto.input) <= spec.data or not node.proto.input[spec.data]:
            continue
        data = node.proto.input[spec.data]
        size, axes = _indexed_size(model, node, data, tensor, spec)
        if size is not None and size > 0 and (best is None or size < best):
            best = size
            where = f"indexes {axes} of {data!r}, of size {size}, in {node.get_type_name()} {node.friendly_name!r}"
    return best, where


def _indexed_size(
    model: Model, node: Node, data: str, indices: str, spec: Indexing
) -> tuple[int | None, str]:
    """The size the indices of ``node`` may reach in ``data`` (its dimension along the node's axis; the
    smallest of those GatherND's index tuples span), and the words for those axes; None where unknown."""
    shape = type_shape(model.value_type(data))
    if shape is None:
        return None, ""
    if not spec.tuples:
        axis = spec.axis if spec.attribute is None else int(_attr(node, spec.attribute, spec.axis))
        axis = axis + len(shape) if axis < 0 else axis
        dim = shape[axis] if 0 <= axis < len(shape) else None
        return (dim if isinstance(dim, int) else None), f"axis {axis}"
    batch = int(_attr(node, "batch_dims", 0))
    index_shape = type_shape(model.value_type(indices))
    depth = index_shape[-1] if index_shape else None
    spanned = shape[batch : batch + depth] if isinstance(depth, int) else shape[batch:]
    sizes = [d for d in spanned if isinstance(d, int)]
    if not spanned or len(sizes) != len(spanned):
        return None, ""
    return min(sizes), f"axes {batch}..{batch + len(sizes) - 1}"


def _mask_reason(model: Model, name: str) -> str:
    """Why input ``name`` is taken for a mask (named like one, cast to bool, a Where condition...), or
    "" where it is not."""
    if "mask" in name.lower():
        return "named like a mask"
    for node, pos, _ in _reached(model, name):
        if pos in MASKING.get(_key(node), ()):
            return f"a mask of {node.get_type_name()} {node.friendly_name!r}"
        if _key(node) == ("", "Cast") and _attr(node, "to") == onnx.TensorProto.BOOL:
            return f"cast to bool by {node.friendly_name!r}"
    return ""


def _attr(node: Node, name: str, default: Any = None) -> Any:
    """The value of the node's attribute ``name``, or ``default``."""
    for a in node.proto.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default
