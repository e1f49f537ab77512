"""Models nobody here wrote: the onnx wheel's backend test data, split across CPU and the accelerator this
ORT flavour has (OPENVINO, or GPU with TF32 off where CUDA is).

* light/*.onnx (squeezenet, resnet50, densenet121, ... IR 3, weights made by ConstantOfShape from shape
  initializers that are also listed as graph inputs): their softmax output is uniform whatever the input
  (every weight is the same value), so a few intermediate activations and the logits are added as graph
  outputs; those depend on the random input and make the comparisons mean something.
* pytorch-converted/ and pytorch-operator/: small exported PyTorch modules with one test data set each.

Every split result is compared with ONE whole-model ONNX Runtime CPU session (``reference``).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper
from support.graphs import assert_close, check_plan, constant_nodes, split_and_run
from support.helpers import ACCELERATOR, EXACT_F32, SPLIT, needs_accelerator, reference

import hetero_cli

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
LIGHT = [
    "squeezenet",
    "bvlc_alexnet",
    "zfnet512",
    "inception_v1",
    "inception_v2",
    "shufflenet",
    "vgg19",
    "resnet50",
    "densenet121",
]
BIG = {"vgg19", "resnet50", "densenet121"}  # one split each
HETERO = SPLIT
DEVICES = ("CPU", ACCELERATOR)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy on values near 1e31 (vgg19)


# --- light models -----------------------------------------------------------------------------------------


@functools.cache
def light(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(model with extra outputs, feeds, reference outputs): computed once per model and session."""
    path = DATA / "light" / f"light_{name}.onnx"
    if not path.exists():
        pytest.skip(f"{path} is not in this onnx wheel")
    original = onnx.load(str(path))
    proto = _with_intermediate_outputs(original, count=4, seed=len(name))
    inits = {t.name for t in proto.graph.initializer}
    (data,) = [i for i in proto.graph.input if i.name not in inits]
    shape = [d.dim_value for d in data.type.tensor_type.shape.dim]
    feeds = {data.name: np.random.default_rng(0).random(shape, dtype=np.float32)}
    return proto, feeds, reference(proto, feeds)


def _with_intermediate_outputs(original: onnx.ModelProto, count: int, seed: int) -> onnx.ModelProto:
    """A copy with the logits (the Softmax's input) and ``count`` random float activations as outputs."""
    proto = onnx.ModelProto()
    proto.CopyFrom(original)
    infos = {v.name: v for v in onnx.shape_inference.infer_shapes(proto).graph.value_info}
    model = hetero_cli.Core().read_model(original)
    constant = constant_nodes(model)
    outputs = {o.name for o in proto.graph.output}
    # ORT's OpenVINO EP fails on a subgraph where a tensor is both an output and Dropout's input
    # ("Input names mismatch between OpenVINO and ONNX"), whoever builds it: such tensors are left out.
    dropped = {n.input[0] for n in proto.graph.node if n.op_type == "Dropout"}
    candidates = [
        n.proto.output[0]
        for n in model.get_ops()
        if n.get_friendly_name() not in constant
        and n.proto.output[0] in infos
        and infos[n.proto.output[0]].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
        and n.proto.output[0] not in outputs | dropped
    ]
    logits = [n.input[0] for n in proto.graph.node if n.op_type == "Softmax" and n.input[0] not in dropped]
    rng = np.random.default_rng(seed)
    sampled = [candidates[i] for i in sorted(rng.choice(len(candidates), count, replace=False))]
    for name in dict.fromkeys(logits + sampled):
        if name not in outputs:
            proto.graph.output.append(infos[name])
    return proto


@pytest.mark.parametrize("name", LIGHT)
def test_light_reference_matches_expected_output(name):
    """The inputs are what the models take: plain ORT reproduces the stored output."""
    proto, _, ref = light(name)
    path = DATA / "light" / f"light_{name}_output_0.pb"
    expected = numpy_helper.to_array(onnx.load_tensor(str(path)))
    first = proto.graph.output[0].name
    np.testing.assert_allclose(ref[first], expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", LIGHT)
def test_light_hetero_cpu_is_bit_exact(name):
    """HETERO:CPU (one subgraph, the exported model) gives exactly what one plain ORT session gives."""
    proto, feeds, ref = light(name)
    compiled = hetero_cli.Core().compile_model(hetero_cli.Core().read_model(proto), "HETERO:CPU")
    assert [s.device for s in compiled.subgraphs] == ["CPU"]
    got = compiled.create_infer_request().infer(feeds)
    assert list(got) == list(ref)
    for name_, want in ref.items():
        np.testing.assert_array_equal(got[name_], want, err_msg=name_)


@needs_accelerator
@pytest.mark.parametrize("name", LIGHT)
def test_light_alternating_blocks(name):
    """CPU and the accelerator alternate every ~1/8 of the non-constant nodes, in topological order."""
    proto, feeds, ref = light(name)
    model = hetero_cli.Core().read_model(proto)
    n_active = len(model.get_ops()) - len(constant_nodes(model))
    block = math.ceil(n_active / 8)
    compiled = split_and_run(
        proto, feeds, ref, HETERO, lambda i, node: DEVICES[(i // block) % 2], config=EXACT_F32
    )
    assert len(compiled.subgraphs) >= 8
    assert set(compiled.execution_devices) == set(DEVICES)


@needs_accelerator
@pytest.mark.parametrize("name", [n for n in LIGHT if n not in BIG])
def test_light_random_runs(name):
    """A seeded random assignment in runs of ~1/12 of the nodes (a branchy model interleaves them, so
    cycles between the runs must be broken)."""
    proto, feeds, ref = light(name)
    model = hetero_cli.Core().read_model(proto)
    switch = min(0.5, 12 / (len(model.get_ops()) - len(constant_nodes(model))))
    rng = np.random.default_rng(sum(map(ord, name)))
    state = {"device": ACCELERATOR}

    def affinity_of(i, node):
        if rng.random() < switch:
            state["device"] = "CPU" if state["device"] == ACCELERATOR else ACCELERATOR
        return state["device"]

    compiled = split_and_run(proto, feeds, ref, HETERO, affinity_of, config=EXACT_F32)
    assert len(compiled.subgraphs) >= 4


@needs_accelerator
@pytest.mark.parametrize("name", LIGHT)
def test_light_automatic(name):
    """Automatic HETERO:<accelerator>,CPU: whatever it chooses, the results are the model's."""
    proto, feeds, ref = light(name)
    core = hetero_cli.Core()
    model = core.read_model(proto)
    compiled = core.compile_model(model, HETERO, EXACT_F32)
    assert compiled.subgraphs
    assert set(compiled.plan.affinities.values()) <= set(DEVICES)
    check_plan(model, compiled.plan, compiled.plan.affinities)
    assert_close(compiled.create_infer_request().infer(feeds), ref)


# --- pytorch-converted / pytorch-operator --------------------------------------------------------------


def _pytorch_cases() -> list:
    dirs = sorted(
        p
        for sub in ("pytorch-converted", "pytorch-operator")
        for p in (DATA / sub).glob("*")
        if (p / "model.onnx").exists()
    )
    return [pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in dirs]


def _tensors(folder: Path, prefix: str) -> list[np.ndarray]:
    files = sorted(folder.glob(f"{prefix}_*.pb"), key=lambda f: int(f.stem.split("_")[-1]))
    return [numpy_helper.to_array(onnx.load_tensor(str(f))) for f in files]


@needs_accelerator
@pytest.mark.parametrize("folder", _pytorch_cases())
def test_pytorch_model_alternating_split(folder):
    """Each node alternates the accelerator / CPU (so one-node models run on it); the results match the
    stored outputs and a plain ORT session. Only models that plain ORT cannot run are skipped."""
    proto = onnx.load(str(folder / "model.onnx"))
    data = folder / "test_data_set_0"
    inputs, expected = _tensors(data, "input"), _tensors(data, "output")
    so = ort.SessionOptions()
    so.log_severity_level = 4
    try:
        session = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception as exc:
        pytest.skip(f"plain ONNX Runtime cannot load it either: {str(exc).splitlines()[0][:160]}")
    feeds = {i.name: x for i, x in zip(session.get_inputs(), inputs, strict=True)}
    ref = reference(proto, feeds)
    for (name, want), stored in zip(ref.items(), expected, strict=True):
        np.testing.assert_allclose(want, stored, rtol=1e-3, atol=1e-6, err_msg=f"plain ORT vs stored {name}")

    compiled = split_and_run(
        proto, feeds, ref, HETERO, lambda i, node: DEVICES[(i + 1) % 2], config=EXACT_F32
    )
    got = compiled.create_infer_request().infer(feeds)
    for (name, value), stored in zip(got.items(), expected, strict=True):
        np.testing.assert_allclose(value, stored, rtol=1e-3, atol=1e-6, err_msg=f"split vs stored {name}")
