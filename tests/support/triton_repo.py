"""A Triton model repository read as Triton reads it, and its ensemble run as Triton's scheduler runs it.

Every config.pbtxt is parsed with Triton's own schema (model_config.proto, shipped in the tritonclient
wheel); each member's config is checked against its model.onnx as Triton's onnxruntime backend checks it
(names, datatypes, dims: -1 matches any size); the ensemble runs each step, in its own ONNX Runtime
session, as soon as the ensemble tensors its input_map names are ready, its outputs stored under the
names its output_map gives, until the ensemble's outputs are all there.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

#: Triton's DataType name -> numpy dtype of the tensors it carries
NUMPY = {
    "TYPE_BOOL": np.bool_,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}


def read_configs(repo: Path) -> dict[str, mc.ModelConfig]:
    """{model name: its parsed config} of every model in ``repo``; each name matches its folder and each
    model has a version folder ``1`` (Triton's layout)."""
    configs = {}
    for path in sorted(repo.glob("*/config.pbtxt")):
        config = text_format.Parse(path.read_text(encoding="utf-8"), mc.ModelConfig())
        assert config.name == path.parent.name
        assert (path.parent / "1").is_dir()
        configs[config.name] = config
    assert sorted(p.name for p in repo.iterdir()) == sorted(configs)
    return configs


def check_member(repo: Path, config: mc.ModelConfig) -> None:
    """What Triton's onnxruntime backend checks at load: the config's inputs and outputs are the
    model's, with its element types and compatible dims."""
    assert config.platform == "onnxruntime_onnx" and config.max_batch_size == 0
    model = onnx.load(str(repo / config.name / "1" / "model.onnx"))
    inits = {i.name for i in model.graph.initializer}
    declared = {v.name: v for v in [*model.graph.input, *model.graph.output] if v.name not in inits}
    listed = [*config.input, *config.output]
    assert sorted(t.name for t in listed) == sorted(declared)
    for t in listed:
        tt = declared[t.name].type.tensor_type
        assert np.dtype(NUMPY[mc.DataType.Name(t.data_type)]) == np.dtype(
            onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        ), t.name
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        want = list(t.reshape.shape) if t.HasField("reshape") else list(t.dims)
        assert len(want) == len(dims), t.name
        assert all(-1 in (a, b) or a == b for a, b in zip(want, dims, strict=True)), t.name


def check_ensemble(configs: Mapping[str, mc.ModelConfig], name: str) -> None:
    """What Triton's ValidateEnsembleConfig checks (core's ensemble_utils.cc): each ensemble tensor has
    one datatype and compatible dims wherever it appears (the ensemble's own inputs and outputs by their
    ``reshape`` where they have one, each member's by its ``dims``); each member input is mapped exactly
    once, each map names a real input or output; no tensor is made twice."""
    ensemble = configs[name]
    seen: dict[str, tuple[int, list[int], str]] = {}

    def meet(tensor: str, data_type: int, dims: list[int], where: str) -> None:
        if tensor not in seen:
            seen[tensor] = (data_type, dims, where)
            return
        have_type, have_dims, there = seen[tensor]
        assert have_type == data_type, f"{tensor}: datatype of {where} differs from {there}'s"
        compatible = len(have_dims) == len(dims) and all(
            -1 in (a, b) or a == b for a, b in zip(have_dims, dims, strict=True)
        )
        assert compatible, f"{tensor}: dims {dims} of {where} against {have_dims} of {there}"

    for t in [*ensemble.input, *ensemble.output]:
        meet(t.name, t.data_type, list(t.reshape.shape) if t.HasField("reshape") else list(t.dims), name)
    made = set()
    for step in ensemble.ensemble_scheduling.step:
        member = configs[step.model_name]
        inputs = {t.name: t for t in member.input}
        outputs = {t.name: t for t in member.output}
        assert sorted(step.input_map) == sorted(inputs), step.model_name
        assert set(step.output_map) <= set(outputs), step.model_name
        for key, tensor in step.input_map.items():
            meet(tensor, inputs[key].data_type, list(inputs[key].dims), step.model_name)
        for key, tensor in step.output_map.items():
            assert tensor not in made, f"{tensor} made twice"
            made.add(tensor)
            meet(tensor, outputs[key].data_type, list(outputs[key].dims), step.model_name)


def providers(config: mc.ModelConfig) -> list[str]:
    """The ONNX Runtime providers Triton's backend would give the member: OpenVINO where the config
    names the openvino CPU accelerator (and this ORT has it), else the CPU EP."""
    accelerators = config.optimization.execution_accelerators.cpu_execution_accelerator
    if any(a.name == "openvino" for a in accelerators) and (
        "OpenVINOExecutionProvider" in ort.get_available_providers()
    ):
        return ["OpenVINOExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def run_ensemble(repo: Path, name: str, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run the ensemble ``name`` of ``repo`` on ``feeds`` as Triton's scheduler does; returns its
    outputs in the order its config lists them. Fails if a step never becomes ready or a step's output
    is made twice."""
    configs = read_configs(repo)
    ensemble = configs[name]
    assert ensemble.platform == "ensemble" and not ensemble.instance_group
    assert sorted(feeds) == sorted(t.name for t in ensemble.input)
    for t in ensemble.input:  # a request's tensors have the ensemble's dims
        assert np.ndim(feeds[t.name]) == len(t.dims), t.name
    check_ensemble(configs, name)
    tensors = dict(feeds)
    pending = list(ensemble.ensemble_scheduling.step)
    while pending:
        ready = [s for s in pending if all(v in tensors for v in s.input_map.values())]
        assert ready, f"no step can run: {[s.model_name for s in pending]} wait for tensors never made"
        for step in ready:
            pending.remove(step)
            config = configs[step.model_name]
            check_member(repo, config)
            so = ort.SessionOptions()
            so.log_severity_level = 3
            path = str(repo / step.model_name / "1" / "model.onnx")
            session = ort.InferenceSession(path, so, providers=providers(config))
            wanted = list(step.output_map)
            inputs = {t.name: t for t in config.input}
            outputs = {t.name: t for t in config.output}
            fed = {k: _as_model_sees(tensors[v], inputs[k]) for k, v in step.input_map.items()}
            got = session.run(wanted, fed)
            for key, value in zip(wanted, got, strict=True):
                target = step.output_map[key]
                assert target not in tensors, f"{target} made twice"
                # Triton hands a reshaped output on in the shape its dims give
                reshaped = outputs[key].HasField("reshape")
                tensors[target] = value.reshape(list(outputs[key].dims)) if reshaped else value
    return {t.name: tensors[t.name] for t in ensemble.output}


def _as_model_sees(value: np.ndarray, tensor: mc.ModelInput) -> np.ndarray:
    """A tensor as a member's model gets it: in its ``reshape`` shape where the config has one."""
    return value.reshape(list(tensor.reshape.shape)) if tensor.HasField("reshape") else value
