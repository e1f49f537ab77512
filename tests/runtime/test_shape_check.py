"""An output whose shape contradicts what ONNX Runtime infers for it fails its subgraph's first inference
(runtime/shape_check.py): HETERO_FALLBACK moves the subgraph, else an InferenceError; never a wrong shape
handed on. The real case is the OpenVINO EP's self-attention split in two (openvino-attention-output-shape,
reproduced in tests/quirks/test_openvino_limits.py)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as h
from quirks.test_openvino_limits import attention_model, attention_splits
from support.helpers import chain_model, make_model, needs_openvino, reference, seeded, vi

import hetero_cli as hc
from hetero_cli.runtime.shape_check import contradiction
from hetero_cli.runtime.steps import plan_steps

SPLIT = "HETERO:OPENVINO,CPU"
QUIRK = "openvino-attention-output-shape"


def only_step(proto):
    compiled = hc.Core().compile_model(proto, "CPU")
    (step,) = plan_steps(compiled.current())
    return compiled.model, step


def test_another_rank_or_the_same_elements_in_another_shape_contradict_inference():
    model, step = only_step(chain_model(("Relu",), shape=(8, 4)))
    assert step.shapes == ((8, 4),)
    assert contradiction(step.outputs, step.shapes, {"y": np.zeros((8, 4), np.float32)}, model) is None
    assert contradiction(step.outputs, step.shapes, {"y": np.zeros((2, 4, 4), np.float32)}, model) == (
        "output y came back in shape [2,4,4], not the [8,4] ONNX Runtime infers for it (another rank)"
    )
    assert contradiction(step.outputs, step.shapes, {"y": np.zeros((4, 8), np.float32)}, model) == (
        "output y came back in shape [4,8], not the [8,4] ONNX Runtime infers for it (the same 32 elements)"
    )


def test_another_size_in_the_same_rank_or_a_shape_only_declared_is_left_to_the_run():
    model, step = only_step(chain_model(("Relu",), shape=(8, 4)))
    # a kernel's own shape rule (a ceil_mode pool on ORT's CPU EP) gives another size, in the same rank
    assert contradiction(step.outputs, step.shapes, {"y": np.zeros((7, 4), np.float32)}, model) is None
    # how many values NonZero finds is data: the [1,3] the output declares is no inference of ORT's
    nodes = [h.make_node("NonZero", ["x"], ["y"], name="nz")]
    proto = make_model(nodes, [vi("x", [3])], [vi("y", [1, 3], TensorProto.INT64)])
    model, step = only_step(proto)
    assert step.shapes == ((1, 3),)
    assert contradiction(step.outputs, step.shapes, {"y": np.zeros((3,), np.int64)}, model) is None


def then_hardmax():
    """The attention, then a Hardmax the OpenVINO EP leaves to CPU: OPENVINO -> CPU, one ORT session
    under LATENCY, where the EP hands the split tensor to the CPU EP's Hardmax."""
    proto = attention_model()
    proto.graph.node.append(h.make_node("Hardmax", ["y"], ["z"], name="hardmax", axis=-1))
    del proto.graph.output[:]
    proto.graph.output.append(vi("z", None))
    return proto


MODELS = {
    "unscaled": (attention_model, (1, 8, 4)),
    "scaled by Mul": (lambda: attention_model(scale="Mul"), (1, 8, 4)),
    "batch 2 scaled by Mul": (lambda: attention_model((2, 8, 4), "Mul"), (2, 8, 4)),
    "then Hardmax on CPU": (then_hardmax, (1, 8, 4)),
    "output over 64 KiB": (lambda: attention_model((1, 128, 160)), (1, 128, 160)),  # ORT allocates it
}
CONFIGS = {
    "latency": {},
    "throughput": {"PERFORMANCE_HINT": "THROUGHPUT"},  # a session per subgraph, on pipeline lanes
    "profiled": {"PERF_COUNT": "YES"},  # outputs made per inference
}


def infer_twice(proto, feeds, config, caplog):
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = hc.Core().compile_model(proto, SPLIT, config)
        request = compiled.create_infer_request()
        results = [dict(request.infer(feeds)) for _ in range(2)]
    return compiled, results


def assert_right(results, want):
    for got in results:
        assert list(got) == list(want)
        for name, value in want.items():
            assert got[name].shape == value.shape, name
            np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-6)


@needs_openvino
@pytest.mark.parametrize(
    ("model", "config"),
    [*((m, "latency") for m in MODELS), ("unscaled", "throughput"), ("unscaled", "profiled")],
)
def test_automatic_mode_gives_the_cpu_eps_result_for_a_self_attention(model, config, caplog):
    make, shape = MODELS[model]
    proto = make()
    feeds = {"x": seeded(shape)}
    compiled, results = infer_twice(proto, feeds, CONFIGS[config], caplog)
    assert_right(results, reference(proto, feeds))
    moves = compiled.moves
    assert all((m.left, m.to, m.quirk) == ("OPENVINO", "CPU", QUIRK) for m in moves)
    if model != "batch 2 scaled by Mul":  # how many rows take a batch of 2 depends on the cores
        assert len(moves) == (1 if attention_splits() else 0)
    warnings = [r.getMessage() for r in caplog.records if r.getMessage().startswith("HETERO_FALLBACK")]
    assert len(warnings) == len(moves)
    assert all(f"failed its first inference on OPENVINO (known EP defect {QUIRK}" in w for w in warnings)


@needs_openvino
@pytest.mark.parametrize(
    ("device", "config", "hint"),
    [
        ("OPENVINO", {}, ""),
        # an inference makes no probe: the next device of the priority list is named
        (SPLIT, {"HETERO_FALLBACK": "NO"}, "; HETERO_FALLBACK=YES would try it on CPU next"),
    ],
)
def test_without_fallback_a_self_attention_split_in_two_is_an_inference_error(device, config, hint):
    """One device (OPENVINO), or HETERO with fallback off: an InferenceError, not the split shape."""
    proto = attention_model()
    feeds = {"x": seeded((1, 8, 4))}
    compiled = hc.Core().compile_model(proto, device, config)
    if not attention_splits():
        assert_right([compiled(feeds)], reference(proto, feeds))
        return
    with pytest.raises(hc.InferenceError) as failed:
        compiled(feeds)
    assert failed.match(
        r"^subgraph1 on OPENVINO failed: output y came back in shape \[1,\d+,\d+,4\], not the \[1,8,4\] "
        rf"ONNX Runtime infers for it \(another rank\) \(known EP defect {QUIRK}, docs/limits.md\)"
    )
    assert str(failed.value).partition("docs/limits.md)")[2].startswith(hint)
