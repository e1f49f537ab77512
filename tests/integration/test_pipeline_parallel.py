"""MODEL_DISTRIBUTION_POLICY=PIPELINE_PARALLEL on models nobody here wrote: the onnx wheel's light models
(weights made by ConstantOfShape, so they count at their inferred size), split over OPENVINO (memory set)
and CPU, compared with one whole-model ONNX Runtime CPU session.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from support.graphs import assert_close, check_plan
from support.helpers import needs_openvino, reference

import hetero_cli
from hetero_cli.placement import config as cfg
from hetero_cli.placement import memory_split

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
HETERO = "HETERO:OPENVINO,CPU"


def _light(name: str) -> onnx.ModelProto:
    path = DATA / f"light_{name}.onnx"
    if not path.exists():
        pytest.skip(f"{path} is not in this onnx wheel")
    return onnx.load(str(path))


def _with_outputs(proto: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    """A copy with ``names`` (tensors shape inference types) added as outputs: the tensors that cross the
    cut and the logits say more than the uniform softmax these models end with."""
    infos = {v.name: v for v in onnx.shape_inference.infer_shapes(proto).graph.value_info}
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    out.graph.output.extend(infos[n] for n in dict.fromkeys(names) if n in infos)
    return out


@needs_openvino
@pytest.mark.parametrize(("name", "fraction"), [("squeezenet", 0.3), ("inception_v1", 0.5)])
def test_light_model_split_by_memory(name, fraction):
    proto = _light(name)
    core = hetero_cli.Core()
    sizes = memory_split.weight_bytes(core.read_model(proto))
    total = sum(sizes.values())
    config = {
        cfg.DISTRIBUTION_POLICY: cfg.PIPELINE_PARALLEL,
        cfg.PERFORMANCE_HINT: "THROUGHPUT",
        "OPENVINO": {cfg.DEVICE_MEMORY: int(memory_split.NEED_FACTOR * fraction * total)},
    }
    plan = core.plan(proto, HETERO, config)
    logits = [n.input[0] for n in proto.graph.node if n.op_type == "Softmax"]
    proto = _with_outputs(proto, plan.crossing_tensors() + logits)

    model = core.read_model(proto)
    affinities = core.query_model(model, HETERO, config)
    on_first = sum(s for n, s in sizes.items() if affinities[n] == "OPENVINO")
    share = memory_split.shares([config["OPENVINO"][cfg.DEVICE_MEMORY], None], total)[0]
    assert memory_split.BAND[0] * share <= on_first / total <= memory_split.BAND[1] * share
    compiled = core.compile_model(model, HETERO, config)
    check_plan(model, compiled.plan, affinities)
    assert compiled.plan.devices[0] == "OPENVINO" and "CPU" in compiled.plan.devices

    (data,) = [i for i in proto.graph.input if i.name not in {t.name for t in proto.graph.initializer}]
    shape = [d.dim_value for d in data.type.tensor_type.shape.dim]
    feeds = {data.name: np.random.default_rng(0).random(shape, dtype=np.float32)}
    assert_close(compiled.create_infer_request().infer(feeds), reference(proto, feeds), rtol=1e-3, atol=1e-4)
