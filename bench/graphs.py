"""Models the harness runs: the onnx wheel's light/ models and synthetic graphs built here.

Synthetic graphs (float32, opset 17, IR 9, seeded):

* ``mlp_sanitised``: a residual MLP whose activations pass through an ``IsInf -> Where`` sanitiser every few
  blocks. The OpenVINO EP refuses IsInf, so automatic ``HETERO:OPENVINO,CPU`` (and ORT's own [OpenVINO, CPU]
  split) alternate between the two EPs.
* ``softmax_chain``: a plain chain of Softmax nodes. Softmax is memory-bound and fuses with nothing, so
  cutting the chain into k contiguous chunks changes no kernel: the only cost of a cut is the boundary.
* ``two_branches``: two (or ``branches``) independent branches of stacked LSTMs on one input, each with
  an output of its own: the shape concurrency inside one inference pays on (issue 45); its nodes carry
  affinities that put each branch on a device of its own (OPENVINO and CPU, or ``devices``).
* ``partition_graph``: a large random DAG of same-shape elementwise nodes (NodeProtos built directly, never
  run) with random affinities over two devices, for the partition scaling test.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 9

LIGHT_MODELS = (
    "squeezenet",
    "shufflenet",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "densenet121",
    "vgg19",
)


def light_dir() -> Path:
    """The onnx wheel's backend test data folder of "light" model zoo models."""
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def light_path(name: str) -> Path:
    """Path of one light/ model (``resnet50`` -> .../light/light_resnet50.onnx)."""
    path = light_dir() / f"light_{name}.onnx"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: is the onnx wheel installed with its test data?")
    return path


def _model(nodes: list[onnx.NodeProto], name: str, inputs, outputs, initializers) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model)
    return model


def mlp_sanitised(
    blocks: int = 16, width: int = 256, batch: int = 8, every: int = 4, seed: int = 0
) -> onnx.ModelProto:
    """Residual MLP ``x + Relu(x @ W + b)`` with ``Where(IsInf(x), 0, x)`` after every ``every`` blocks."""
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = [numpy_helper.from_array(np.zeros((), np.float32), "zero")]
    x = "x"
    for i in range(blocks):
        w = (rng.standard_normal((width, width)) / (4 * np.sqrt(width))).astype(np.float32)
        b = (rng.standard_normal(width) * 0.01).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [
            helper.make_node("MatMul", [x, f"w{i}"], [f"mm{i}"], name=f"matmul{i}"),
            helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"lin{i}"], name=f"bias{i}"),
            helper.make_node("Relu", [f"lin{i}"], [f"act{i}"], name=f"relu{i}"),
            helper.make_node("Add", [x, f"act{i}"], [f"res{i}"], name=f"residual{i}"),
        ]
        x = f"res{i}"
        if (i + 1) % every == 0 and i + 1 < blocks:
            nodes += [
                helper.make_node("IsInf", [x], [f"inf{i}"], name=f"isinf{i}"),
                helper.make_node("Where", [f"inf{i}", "zero", x], [f"clean{i}"], name=f"where{i}"),
            ]
            x = f"clean{i}"
    nodes.append(helper.make_node("Identity", [x], ["y"], name="output"))
    return _model(
        nodes,
        f"mlp_sanitised_{blocks}x{width}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, width])],
        inits,
    )


def saved_mlp_sanitised(folder: Path) -> Path:
    """mlp_sanitised() with its defaults, saved as ``folder``/mlp_sanitised.onnx; returns that path."""
    path = folder / "mlp_sanitised.onnx"
    onnx.save(mlp_sanitised(), str(path))
    return path


def two_branches(
    hidden: int = 128,
    steps: int = 200,
    layers: int = 2,
    batch: int = 1,
    seed: int = 0,
    affinities: bool = True,
    devices: tuple[str, ...] = ("OPENVINO", "CPU"),
    branches: int = 2,
) -> onnx.ModelProto:
    """x [steps, batch, hidden] into ``branches`` branches (a, b, c, ...; at most 26) of ``layers`` stacked
    LSTMs each (their own weights): ya, yb, ... [steps, batch, hidden]. Recurrent steps are small matrix
    products that intra-op threads cannot fill, so two branches on two cores at once take about half the
    time of one session running them in turn. Affinities (rt_info): branch a on ``devices[0]``, b on
    ``devices[1]`` (OPENVINO and CPU), and so on round ``devices``. No node joins them: a join would be cut
    into one branch's subgraph, which then waits for the other (subgraphs, not nodes, are what run at
    once). ``affinities`` False: none set (hetero-cli places every node)."""
    if not 1 <= branches <= len(string.ascii_lowercase):
        raise ValueError(f"branches must be in [1, {len(string.ascii_lowercase)}]")
    rng = np.random.default_rng(seed)
    nodes, inits, ends = [], [], []
    names = string.ascii_lowercase[:branches]
    placed = [devices[i % len(devices)] for i in range(branches)] if affinities else []
    for branch, device in zip(names, placed or [None] * branches, strict=True):
        previous = "x"
        for layer in range(layers):
            name = f"{branch}{layer}"
            for suffix, shape in (("W", [1, 4 * hidden, hidden]), ("R", [1, 4 * hidden, hidden])):
                weight = (rng.standard_normal(shape) / np.sqrt(hidden)).astype(np.float32)
                inits.append(numpy_helper.from_array(weight, f"{name}_{suffix}"))
            inits.append(numpy_helper.from_array(np.zeros([1, 8 * hidden], np.float32), f"{name}_B"))
            lstm = helper.make_node(
                "LSTM",
                [previous, f"{name}_W", f"{name}_R", f"{name}_B"],
                [f"{name}_y"],
                name=f"{name}_lstm",
                hidden_size=hidden,
            )
            squeeze_axes = f"{name}_axes"
            inits.append(numpy_helper.from_array(np.array([1], np.int64), squeeze_axes))
            squeeze = helper.make_node(
                "Squeeze", [f"{name}_y", squeeze_axes], [f"{name}_h"], name=f"{name}_squeeze"
            )
            for node in (lstm, squeeze) if device else ():
                node.metadata_props.add(key="affinity", value=device)
            nodes += [lstm, squeeze]
            previous = f"{name}_h"
        out = helper.make_node("Identity", [previous], [f"y{branch}"], name=f"{branch}_out")
        if device:
            out.metadata_props.add(key="affinity", value=device)
        ends.append(out)
    nodes += ends  # the outputs last, after every branch
    shape = [steps, batch, hidden]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    outputs = [helper.make_tensor_value_info(f"y{b}", TensorProto.FLOAT, shape) for b in names]
    return _model(nodes, "two_branches" if branches == 2 else f"branches_{branches}", inputs, outputs, inits)


def softmax_chain(length: int = 32, shape: tuple[int, ...] = (1, 64)) -> onnx.ModelProto:
    """``length`` Softmax nodes in a row over a tensor of ``shape`` (the boundary tensor of any cut)."""
    return _softmaxes(length, shape, set(), f"softmax_chain_{length}")


def sanitised_chain(length: int = 16, cuts: int = 0, shape: tuple[int, ...] = (1, 64)) -> onnx.ModelProto:
    """``softmax_chain`` with an ``IsInf -> Where`` sanitiser after each of ``cuts`` evenly spaced Softmax
    nodes. The OpenVINO EP refuses IsInf, so ORT's own [OpenVINO, CPU] session and HETERO:OPENVINO,CPU
    both cut the chain into the same ``cuts + 1`` OpenVINO runs and ``cuts`` CPU sanitisers."""
    if not 0 <= cuts < length:
        raise ValueError(f"cuts must be in [0, {length})")
    after = {(k + 1) * length // (cuts + 1) - 1 for k in range(cuts)}
    return _softmaxes(length, shape, after, f"sanitised_chain_{length}_{cuts}")


def _softmaxes(length: int, shape: tuple[int, ...], sanitised: set[int], name: str) -> onnx.ModelProto:
    """Softmax nodes in a row, an ``IsInf -> Where`` sanitiser after those whose index is in ``sanitised``."""
    nodes = []
    x = "x"
    for i in range(length):
        nodes.append(helper.make_node("Softmax", [x], [f"s{i}"], name=f"softmax{i}", axis=-1))
        x = f"s{i}"
        if i in sanitised:
            nodes += [
                helper.make_node("IsInf", [x], [f"inf{i}"], name=f"isinf{i}"),
                helper.make_node("Where", [f"inf{i}", "zero", x], [f"clean{i}"], name=f"where{i}"),
            ]
            x = f"clean{i}"
    nodes[-1].output[0] = "y"
    inits = [numpy_helper.from_array(np.zeros((), np.float32), "zero")] if sanitised else []
    return _model(
        nodes,
        f"{name}_{'x'.join(map(str, shape))}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
        inits,
    )


@dataclass
class PartitionGraph:
    """A synthetic model for partition timing, with one affinity per node."""

    model: onnx.ModelProto
    affinities: dict[str, str]


_UNARY = ("Relu", "Neg", "Abs", "Sigmoid", "Tanh")
_BINARY = ("Add", "Mul", "Sub", "Max", "Min")


def partition_graph(nodes: int, seed: int = 0, window: int = 16) -> PartitionGraph:
    """A random DAG of ``nodes`` elementwise [1, 4] float nodes with random affinities (CPU or OPENVINO).

    The first node reads the model input; every other one reads one or two of the last ``window`` tensors
    produced before it. Built from NodeProtos directly, so 100,000 nodes take about a second.
    """
    rng = random.Random(seed)
    protos: list[onnx.NodeProto] = [helper.make_node("Relu", ["x"], ["t0"], name="n0")]
    affinities: dict[str, str] = {"n0": rng.choice(("CPU", "OPENVINO"))}
    tensors = ["t0"]
    read: set[str] = set()
    for i in range(1, nodes):
        recent = tensors[-window:]
        out = f"t{i}"
        name = f"n{i}"
        if rng.random() < 0.5:
            a = rng.choice(recent)
            proto = helper.make_node(rng.choice(_UNARY), [a], [out], name=name)
            read.add(a)
        else:
            a, b = rng.choice(recent), rng.choice(recent)
            proto = helper.make_node(rng.choice(_BINARY), [a, b], [out], name=name)
            read.update((a, b))
        protos.append(proto)
        tensors.append(out)
        affinities[name] = rng.choice(("CPU", "OPENVINO"))
    outputs = [t for t in tensors if t not in read]
    graph = helper.make_graph(
        protos,
        f"partition_{nodes}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info(t, TensorProto.FLOAT, [1, 4]) for t in outputs],
    )
    model = helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", OPSET)])
    return PartitionGraph(model, affinities)


def random_feeds(inputs: list[tuple[str, list[int | str | None]]], seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded uniform [0, 1) float32 data for ``[(name, shape)]`` (symbolic dimensions become 1)."""
    rng = np.random.default_rng(seed)
    return {
        name: rng.random([d if isinstance(d, int) and d > 0 else 1 for d in shape], dtype=np.float32)
        for name, shape in inputs
    }
