"""MODEL_DISTRIBUTION_POLICY=PIPELINE_PARALLEL: each device gets a part of the model by its memory.

OpenVINO's rule (its HETERO plugin and ``ov::get_supported_nodes``), with one change (``shares``):

1. the need is 1.2 x the bytes of all weights (initializers and Constant values);
2. each device gets a share of the weights from its memory (``shares``);
3. in priority order, each device walks the nodes no earlier device took, in topological order, summing
   the weight bytes of the nodes it supports, and takes those before a cut that lies within 0.95-1.05 x
   its share where the fewest tensor elements cross the cut (where no position lies in that band: the
   last one at or below its share); the last device takes what is left;
4. a node the devices after its cut do not support goes back to the first device that does.

Constants then follow their first reader, as in the greedy query. Each device's part is a prefix of one
topological order, so the parts pass tensors forward only; partition() keeps the plan acyclic wherever
a device's unsupported nodes interleave.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import onnx
from onnx import helper

from ..graph import Model, Node
from .devices import Device
from .query import place_constants

#: the memory a model needs, as a multiple of its weights' bytes (OpenVINO's 1.2)
NEED_FACTOR = 1.2
#: where a device's cut may lie, as fractions of its share (OpenVINO's 0.95-1.05)
BAND = (0.95, 1.05)


def shares(memories: Sequence[int | None], weights: int) -> list[float]:
    """Each device's share of ``weights`` bytes (fractions summing to 1), from its memory in bytes (None:
    unlimited).

    The split is as even as the memories allow: a device whose memory cannot hold 1.2 x an even share
    gets what its memory holds, and the others split the rest evenly (water-filling). So a first device
    that could hold the whole model still gets only its share, where OpenVINO gives it everything
    (openvinotoolkit/openvino#38250). Where all the memories together cannot hold the need, the shares
    are proportional to the memories (OpenVINO's memory / the devices' total).
    """
    need = NEED_FACTOR * max(weights, 1)
    caps = [math.inf if m is None else m / need for m in memories]
    if sum(caps) < 1:
        return [cap / sum(caps) for cap in caps]
    out = [0.0] * len(caps)
    left, open_ = 1.0, len(caps)
    for i in sorted(range(len(caps)), key=lambda j: caps[j]):
        out[i] = min(caps[i], left / open_)
        left -= out[i]
        open_ -= 1
    return out


def weight_bytes(model: Model) -> dict[str, int]:
    """{friendly name: weight bytes} of the non-constant nodes: the bytes of the constants each reads (an
    initializer's; a value computed from constants alone, such as ConstantOfShape's, at its inferred size,
    or where that is unknown the initializers and Constant values it is computed from), each constant
    counted once, at its first reader in topological order."""
    initializers = {t.name: tensor_bytes(t) for t in model.skeleton.graph.initializer}
    seen: set[str] = set()
    out: dict[str, int] = {}
    for node in model.get_ops():
        if not node.is_constant:
            fresh = [t for t in node.inputs if model.is_constant(t) and t not in seen]
            seen.update(fresh)
            out[node.friendly_name] = sum(_constant_bytes(model, t, initializers) for t in fresh)
    return out


def _constant_bytes(model: Model, tensor: str, initializers: Mapping[str, int]) -> int:
    """The bytes of constant ``tensor``: as above."""
    if tensor in initializers:
        return initializers[tensor]
    size = _static_bytes(model.value_type(tensor))
    if size is not None:
        return size
    chain = model.constant_nodes_for([tensor])
    return sum(initializers.get(i, 0) for n in chain for i in n.inputs) + sum(
        _constant_op_bytes(n) for n in chain if n.proto.op_type == "Constant"
    )


def _static_bytes(value_type: onnx.TypeProto | None) -> int | None:
    """A tensor type's bytes where its element type and every dimension are known; None otherwise."""
    if value_type is None or not value_type.HasField("tensor_type"):
        return None
    tensor = value_type.tensor_type
    if tensor.elem_type in (0, onnx.TensorProto.STRING) or not tensor.HasField("shape"):
        return None
    if not all(d.HasField("dim_value") for d in tensor.shape.dim):
        return None
    itemsize = helper.tensor_dtype_to_np_dtype(tensor.elem_type).itemsize
    return math.prod(d.dim_value for d in tensor.shape.dim) * itemsize


def _constant_op_bytes(node: Node) -> int:
    """A Constant node's value bytes (a tensor attribute's, else 8 per listed number)."""
    return sum(
        tensor_bytes(a.t) if a.type == onnx.AttributeProto.TENSOR else 8 * max(len(a.floats), len(a.ints), 1)
        for a in node.proto.attribute
    )


def tensor_bytes(tensor: onnx.TensorProto) -> int:
    """A TensorProto's bytes from its dims and element type (its data may be elsewhere)."""
    if tensor.data_type == onnx.TensorProto.STRING:
        return sum(len(s) for s in tensor.string_data)
    itemsize = helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    return math.prod(tensor.dims) * itemsize


def pipeline_affinities(
    model: Model,
    devices: Sequence[Device],
    supports: Callable[[Device], frozenset[str]],
    memories: Sequence[int | None],
) -> dict[str, str]:
    """{friendly name: device name} for the nodes of ``model`` split by memory (the module's rule).

    ``supports(device)``: the non-constant nodes the device's EP claims; ``memories``: each device's bytes
    (None: unlimited). Nodes no device supports are left out, as the greedy query leaves them. Affinities
    set by hand are not its business: they make a compile manual, as in OpenVINO, and this split is where
    query_model's answer to fix by hand starts.
    """
    sizes = weight_bytes(model)
    by_weight = sum(sizes.values()) > 0
    weight = sizes if by_weight else dict.fromkeys(sizes, 1)  # no weights: split by node count
    total = sum(weight.values())
    parts = shares(memories, total)
    result: dict[str, str] = {}
    for i, (device, share) in enumerate(zip(devices, parts, strict=True)):
        walk = [n for n in model.get_ops() if not n.is_constant and n.friendly_name not in result]
        claims = supports(device)
        take = len(walk) if i == len(devices) - 1 else _cut(model, walk, claims, weight, share * total)
        result.update({n.friendly_name: device.name for n in walk[:take] if n.friendly_name in claims})
    for node in model.get_ops():  # cut off from a device and supported by none after it
        if not node.is_constant and node.friendly_name not in result:
            first = next((d for d in devices if node.friendly_name in supports(d)), None)
            if first is not None:
                result[node.friendly_name] = first.name
    place_constants(model, result, devices[0].name)
    return {n.friendly_name: result[n.friendly_name] for n in model.get_ops() if n.friendly_name in result}


def _cut(
    model: Model, walk: list[Node], claims: frozenset[str], weight: Mapping[str, int], target: float
) -> int:
    """How many nodes of ``walk`` the device takes (the nodes of ``claims`` among them are its): the
    position whose claimed weight lies within BAND x ``target`` where the fewest elements cross; else
    the last at or below ``target`` where the fewest cross."""
    cumulative = [0]
    for node in walk:
        cumulative.append(
            cumulative[-1] + (weight[node.friendly_name] if node.friendly_name in claims else 0)
        )
    if cumulative[-1] <= target * BAND[1]:
        return len(walk)
    crossing = _crossing_elements(model, walk)
    band = [k for k, c in enumerate(cumulative) if BAND[0] * target <= c <= BAND[1] * target]
    if not band:
        below = max(c for c in cumulative if c <= target)
        band = [k for k, c in enumerate(cumulative) if c == below]
    return min(band, key=lambda k: (crossing[k], abs(cumulative[k] - target), k))


def _crossing_elements(model: Model, walk: list[Node]) -> list[int]:
    """For each cut k (0..len(walk): the first k nodes before it), the elements of the tensors made before
    it and read after it (model inputs and constants are not passed, so they never cross)."""
    last_read: dict[str, int] = {}
    for p, node in enumerate(walk):
        for name in node.inputs:
            last_read[name] = p
    delta = [0] * (len(walk) + 2)
    for p, node in enumerate(walk):
        for name in node.outputs:
            q = last_read.get(name, -1)
            if q > p:
                elements = _elements(model.value_type(name))
                delta[p + 1] += elements
                delta[q + 1] -= elements
    out, running = [], 0
    for k in range(len(walk) + 1):
        running += delta[k]
        out.append(running)
    return out


def _elements(value_type: onnx.TypeProto | None) -> int:
    """A tensor's element count, a dimension of unknown size counting 1."""
    if value_type is None or not value_type.HasField("tensor_type"):
        return 1
    dims = value_type.tensor_type.shape.dim
    return math.prod(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in dims)
