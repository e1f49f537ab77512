"""validate_model and runtime.tap on small generated graphs: real ONNX Runtime sessions, the CPU EP and the
OpenVINO EP. Where OpenVINO's float32 arithmetic differs from the CPU EP's (Exp, Softmax: checked in each
test first, at zero tolerance), a zero tolerance fails the split and the localisation must name the very
subgraph (and with bisect the very node) whose arithmetic differs."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper as h
from support.arithmetic import require_only_differing, require_openvino_difference
from support.helpers import (
    EXP_CHAIN,
    chain_model,
    const,
    cpu_split,
    make_model,
    needs_openvino,
    ort_run,
    seeded,
    vi,
)

import hetero_cli as hc
from hetero_cli.app.validate import Tolerances, validate_model
from hetero_cli.errors import InferenceError, ValidationError
from hetero_cli.runtime import tap

DIGITS = Path(__file__).resolve().parents[2] / "models" / "digits.onnx"
ZERO = Tolerances.parse(["0"], ["0"])
# only Exp (n3) computes differently on the OpenVINO EP: Neg, Abs and Relu are exact on both
MM_NODES = ("mm1", "sm1", "mm2", "exp", "sm2")


def matmul_softmax_model():
    """x[n,16] -> MatMul(w1) -> Softmax -> MatMul(w2) -> Exp -> Softmax -> y, random weights."""
    rng = np.random.default_rng(0)
    nodes = [
        h.make_node("MatMul", ["x", "w1"], ["a"], name="mm1"),
        h.make_node("Softmax", ["a"], ["b"], name="sm1", axis=-1),
        h.make_node("MatMul", ["b", "w2"], ["c"], name="mm2"),
        h.make_node("Exp", ["c"], ["d"], name="exp"),
        h.make_node("Softmax", ["d"], ["y"], name="sm2", axis=-1),
    ]
    weights = [const(w, rng.standard_normal((16, 16))) for w in ("w1", "w2")]
    return make_model(nodes, [vi("x", ["n", 16])], [vi("y", ["n", 16])], weights, name="mmsm")


def split_model(first: str, second: str):
    """The MatMul/Softmax model with its first two nodes on ``first`` and the other three on ``second``."""
    core = hc.Core()
    model = core.read_model(matmul_softmax_model())
    model.set_affinities({n: first if k < 2 else second for k, n in enumerate(MM_NODES)})
    return core, model


# --- passes -------------------------------------------------------------------------------------------------


def test_a_cpu_split_passes_bit_exact():
    core = hc.Core()
    model = core.read_model(chain_model(("Relu", "Neg", "Abs", "Sigmoid"), shape=(3, 5)))
    report = validate_model(core, model, "CPU", tolerances=ZERO)
    assert report.passed and report.localisation is None
    [[comparison]] = report.iterations
    assert comparison.name == "y" and comparison.max_abs == 0
    assert report.device == "CPU" and report.reference == "CPU"
    assert list(report.inputs[0]) == ["x"] and report.inputs[0]["x"].shape == (3, 5)
    np.testing.assert_array_equal(report.outputs[0]["y"], report.reference_outputs[0]["y"])


def test_random_inputs_are_seeded_and_given_inputs_are_used():
    core = hc.Core()
    model = core.read_model(chain_model(shape=(2, 3)))
    one = validate_model(core, model, "CPU", seed=3)
    again = validate_model(core, model, "CPU", seed=3)
    other = validate_model(core, model, "CPU", seed=4)
    np.testing.assert_array_equal(one.inputs[0]["x"], again.inputs[0]["x"])
    assert not np.array_equal(one.inputs[0]["x"], other.inputs[0]["x"])
    feeds = [{"x": seeded((2, 3), seed=k)} for k in range(3)]
    given = validate_model(core, model, "CPU", inputs=feeds)
    assert len(given.iterations) == 3 and given.passed
    for k in range(3):
        np.testing.assert_array_equal(given.inputs[k]["x"], feeds[k]["x"])
        np.testing.assert_array_equal(given.reference_outputs[k]["y"], ort_run(chain_model(), feeds[k])["y"])


@needs_openvino
@pytest.mark.parametrize("order", [("CPU", "OPENVINO"), ("OPENVINO", "CPU")])
def test_a_split_over_openvino_passes_within_the_default_tolerances(order):
    core, model = split_model(*order)
    report = validate_model(core, model, "HETERO:OPENVINO,CPU", shapes={"x": (4, 16)})
    assert report.passed, report.iterations
    assert report.iterations[0][0].max_abs < 1e-5


# --- fails and localises ---------------------------------------------------------------------------------------


@needs_openvino
def test_openvino_alone_fails_at_zero_tolerance_where_its_arithmetic_differs():
    """The premise of the tests below (OPENVINO's MatMul and Softmax round otherwise than the CPU EP's)
    checked first: where it holds, OPENVINO alone fails at zero tolerance, by a non-zero error."""
    require_openvino_difference(matmul_softmax_model(), {"x": seeded((4, 16))})
    core = hc.Core()
    report = validate_model(
        core, core.read_model(matmul_softmax_model()), "OPENVINO", shapes="[4,16]", tolerances=ZERO
    )
    assert not report.passed
    assert report.iterations[0][0].max_abs > 0


@needs_openvino
@pytest.mark.parametrize(
    ("order", "named"), [(("CPU", "OPENVINO"), "subgraph2"), (("OPENVINO", "CPU"), "subgraph1")]
)
def test_zero_tolerance_fails_and_names_the_openvino_subgraph(order, named):
    """CPU first: the CPU subgraph matches the reference exactly, the OpenVINO one after it is the first to
    differ (naming subgraph1 would be wrong); OpenVINO first: subgraph1 already differs."""
    require_openvino_difference(matmul_softmax_model(), {"x": seeded((4, 16))})
    core, model = split_model(*order)
    report = validate_model(core, model, "HETERO:OPENVINO,CPU", shapes={"x": (4, 16)}, tolerances=ZERO)
    assert not report.passed
    loc = report.localisation
    assert loc is not None and loc.first is not None
    assert loc.first.name == named and loc.first.device == "OPENVINO"
    assert loc.first.nodes == (MM_NODES[:2] if order[0] == "OPENVINO" else MM_NODES[2:])
    assert [c.name for c in loc.checked] == ["subgraph1", "subgraph2"][: int(named[-1])]
    assert all(check.passed for check in loc.checked[:-1])
    assert loc.first.differing and all(c.max_abs > 0 for c in loc.first.differing)
    # between the subgraphs: the tensor b, compared with the default tolerance (here zero)
    if named == "subgraph1":
        assert [c.name for c in loc.first.differing] == ["b"]


@needs_openvino
def test_per_output_tolerances_decide_the_verdict():
    require_openvino_difference(matmul_softmax_model(), {"x": seeded((4, 16))})
    core, model = split_model("CPU", "OPENVINO")
    loose = Tolerances.parse(["0", "y:1e-3"], ["0"])
    assert validate_model(core, model, "HETERO:OPENVINO,CPU", shapes={"x": (4, 16)}, tolerances=loose).passed
    strict = Tolerances.parse(["1", "y:0"], ["1", "y:0"])
    assert not validate_model(
        core, model, "HETERO:OPENVINO,CPU", shapes={"x": (4, 16)}, tolerances=strict
    ).passed


@needs_openvino
def test_bisect_names_the_one_node_whose_arithmetic_differs():
    require_only_differing(EXP_CHAIN, seeded((4, 64)), ["n3"])
    core = hc.Core()
    model = core.read_model(chain_model(EXP_CHAIN, shape=(4, 64)))
    feeds = [{"x": seeded((4, 64))}]
    report = validate_model(core, model, "OPENVINO", inputs=feeds, tolerances=ZERO, bisect=True)
    loc = report.localisation
    assert not report.passed and loc is not None and loc.first is not None
    assert loc.first.name == "subgraph1" and len(loc.first.nodes) == 8
    assert loc.culprit == ("n3",)
    assert loc.bisect[0].nodes == tuple(f"n{k}" for k in range(8)) and not loc.bisect[0].passed
    # halves of 8 nodes: at most 3 rounds of two steps after the first
    assert 3 <= len(loc.bisect) <= 7
    assert [s.nodes for s in loc.bisect if len(s.nodes) == 1 and not s.passed] == [("n3",)]
    assert all(s.passed for s in loc.bisect if "n3" not in s.nodes)
    assert all(not s.passed for s in loc.bisect if "n3" in s.nodes)


@needs_openvino
def test_a_split_in_one_session_is_compiled_again_to_localise():
    """digits.onnx on HETERO:OPENVINO,CPU runs as one ONNX Runtime session (LATENCY): no boundary to tap,
    so the localisation compiles it with THROUGHPUT, and names the OpenVINO subgraph after the CPU one."""
    require_openvino_difference(onnx.load(str(DIGITS)), {"image": seeded((2, 1, 32, 32))})
    core = hc.Core()
    model = core.read_model(DIGITS)
    report = validate_model(
        core, model, "HETERO:OPENVINO,CPU", shapes={"image": (2, 1, 32, 32)}, tolerances=ZERO
    )
    loc = report.localisation
    assert not report.passed and loc is not None and loc.first is not None
    assert any("THROUGHPUT" in note for note in loc.notes), loc.notes
    assert [(c.name, c.device, c.passed) for c in loc.checked] == [
        ("subgraph1", "CPU", True),
        ("subgraph2", "OPENVINO", False),
    ]


# --- what validate_model refuses -------------------------------------------------------------------------------


def test_tolerances_naming_an_output_the_model_lacks_are_refused():
    core = hc.Core()
    model = core.read_model(chain_model())
    with pytest.raises(ValidationError, match=r"'logits'.*outputs are y"):
        validate_model(core, model, "CPU", tolerances=Tolerances.parse(["logits:1e-3"]))


def test_a_dynamic_dimension_without_a_shape_is_refused():
    core = hc.Core()
    model = core.read_model(matmul_softmax_model())
    with pytest.raises(ValidationError, match=r"-shape or -data_shape.*x\[1,16\]"):
        validate_model(core, model, "CPU")
    with pytest.raises(ValidationError, match="rank"):
        validate_model(core, model, "CPU", shapes="[4,16,1]")
    with pytest.raises(ValidationError, match="unknown input"):
        validate_model(core, model, "CPU", shapes={"z": (4, 16)})


@pytest.mark.parametrize(
    ("feeds", "words"),
    [
        ({"z": np.zeros((2, 3), np.float32)}, "unknown input.*'z'.*missing input.*'x'"),
        ({"x": np.zeros((2, 3), np.float64)}, "float64 but the model takes float32"),
        ({"x": np.zeros((2, 4), np.float32)}, r"shape \[2,4\] but the model takes \[2,3\]"),
        ([1, 2], "input set 0 is list"),
    ],
)
def test_inputs_that_do_not_fit_the_model_are_refused(feeds, words):
    core = hc.Core()
    with pytest.raises(ValidationError, match=words):
        validate_model(core, core.read_model(chain_model()), "CPU", inputs=[feeds])


def test_given_inputs_that_give_one_named_dimension_two_sizes_are_refused_before_a_compile():
    """As -shape's are: a[2,4] and b[3,4] for an Add of a[N,4] and b[N,4] fail every session otherwise."""
    graph = h.make_graph(
        [h.make_node("Add", ["a", "b"], ["y"], name="add")],
        "two",
        [vi("a", ["N", 4]), vi("b", ["N", 4])],
        [vi("y", ["N", 4])],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    core = hc.Core()
    given = [{"a": np.ones((2, 4), np.float32), "b": np.ones((3, 4), np.float32)}]
    with pytest.raises(
        ValidationError, match="input set 0: inputs 'a' and 'b' give dimension 'N' the sizes 2 and 3"
    ):
        validate_model(core, model, "CPU", inputs=given)
    agreeing = [{"a": np.ones((3, 4), np.float32), "b": np.ones((3, 4), np.float32)}]
    assert validate_model(core, model, "CPU", inputs=agreeing).passed


def test_a_split_as_reference_is_refused_as_on_the_command_line():
    core = hc.Core()
    with pytest.raises(ValidationError, match="'HETERO:CPU' is a split: the reference is one device"):
        validate_model(core, chain_model(), "CPU", reference="HETERO:CPU")


# --- tap ------------------------------------------------------------------------------------------------------


def test_tap_gives_every_subgraph_output_as_the_whole_model_computes_it():
    proto = chain_model(("Relu", "Neg", "Abs", "Sigmoid"), shape=(2, 3))
    compiled = cpu_split(proto)  # four CPU subgraphs
    x = seeded((2, 3))
    values = tap(compiled, {"x": x})
    assert list(values) == ["t0", "t1", "t2", "y"]
    step = np.maximum(x, 0)
    for name, want in zip(values, (step, -step, step, 1 / (1 + np.exp(-step))), strict=True):
        np.testing.assert_allclose(values[name], want, rtol=1e-6, err_msg=name)
        assert isinstance(values[name], np.ndarray)
    with pytest.raises(InferenceError, match="missing input"):
        tap(compiled, {})


@needs_openvino
def test_tap_refuses_a_split_run_in_one_session():
    compiled = hc.Core().compile_model(hc.Core().read_model(DIGITS), "HETERO:OPENVINO,CPU")
    if not compiled.one_session:
        pytest.fail("digits.onnx on HETERO:OPENVINO,CPU was expected to run in one session (LATENCY)")
    with pytest.raises(InferenceError, match="THROUGHPUT"):
        tap(compiled, {"image": np.zeros((1, 1, 32, 32), np.float32)})


@needs_openvino
def test_a_model_behind_a_symlink_to_another_folder_is_localised(tmp_path):
    """The localisation's models made from the validated one reference its weights in its real file: a
    model read through a symlink in another folder (as models/digits.onnx links into the package) compiles
    them against the real file's folder, which ORT insists the references stay inside."""
    require_openvino_difference(onnx.load(str(DIGITS)), {"image": seeded((2, 1, 32, 32))})
    real = tmp_path / "real"
    real.mkdir()
    shutil.copy(Path(DIGITS).resolve(), real / "digits.onnx")
    link = tmp_path / "link"
    link.mkdir()
    (link / "digits.onnx").symlink_to(real / "digits.onnx")
    core = hc.Core()
    model = core.read_model(link / "digits.onnx")
    report = validate_model(
        core, model, "HETERO:OPENVINO,CPU", shapes={"image": (2, 1, 32, 32)}, tolerances=ZERO
    )
    assert report.localisation is not None and report.localisation.first is not None
