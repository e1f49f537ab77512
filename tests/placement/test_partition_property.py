"""Property tests of the partition: random ONNX DAGs (tests/support/graphs.py) with random affinities.

* plan-only checks (hetero_cli.placement.partition.partition, no session): many examples, also with made-up devices;
* hand-built cases: a diamond that must be cut in three, a join that must not be over-split, and a
  shared-input cycle;
* full runs: manual and automatic HETERO:OPENVINO,CPU compiled and run, compared with one plain ORT session,
  every exported subgraph passing the ONNX checker.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import event, given, settings
from onnx import TensorProto, helper
from support.graphs import (
    IR_VERSION,
    OPSET,
    PLAN_ONLY,
    WITH_SESSIONS,
    Case,
    cases,
    check_plan,
    constant_nodes,
)
from support.helpers import ACCELERATOR, EXACT_F32, SPLIT, reference, requires_openvino

import hetero_cli
from hetero_cli.graph.model import Model
from hetero_cli.placement.export import subgraph_model
from hetero_cli.placement.partition import partition

HETERO = "HETERO:OPENVINO,CPU"

# value-exact ops: any EP gives the same bits, so a split that puts only these on OpenVINO is bit-exact
EXACT_OPS = frozenset({"Relu", "Neg", "Abs", "Identity", "Concat", "Split", "Max", "Clip"})


# --- plan only ------------------------------------------------------------------------------------------------


@PLAN_ONLY
@given(cases(("CPU", "OPENVINO"), max_steps=20))
def test_plan_invariants_two_devices(case: Case):
    model = Model(case.model)
    affinities = case.affinity_map(model)
    check_plan(model, partition(model, affinities), affinities)


@PLAN_ONLY
@given(cases(("A", "B", "C"), max_steps=20))
def test_plan_invariants_three_made_up_devices(case: Case):
    model = Model(case.model)
    affinities = case.affinity_map(model)
    check_plan(model, partition(model, affinities), affinities)


@PLAN_ONLY
@given(cases(("GPU", "NPU", "FPGA", "CPU"), max_steps=20))
def test_plan_invariants_four_made_up_devices(case: Case):
    model = Model(case.model)
    affinities = case.affinity_map(model)
    check_plan(model, partition(model, affinities), affinities)


@requires_openvino
@settings(PLAN_ONLY, max_examples=100)
@given(cases(("CPU", "OPENVINO"), max_steps=15))
def test_plan_is_deterministic_and_matches_core_plan(case: Case):
    """The same model and affinities give the same plan, through partition() or Core.plan()."""
    first = Model(case.model)
    affinities = case.affinity_map(first)
    plan = partition(first, affinities)
    again = Model(case.model)
    assert partition(again, case.affinity_map(again)) == plan
    case.apply_affinities(again)
    via_core = hetero_cli.Core().plan(again, "HETERO:CPU,OPENVINO")
    assert via_core.subgraphs == plan.subgraphs
    assert dict(via_core.output_sources) == dict(plan.output_sources)


# --- hand-built cases -----------------------------------------------------------------------------------------


def _model(nodes, inputs, outputs, shape=(2, 3)) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "hand",
        [helper.make_tensor_value_info(i, TensorProto.FLOAT, shape) for i in inputs],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, shape) for o in outputs],
    )
    return helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", OPSET)])


def _plan(proto, affinities):
    model = Model(proto)
    plan = partition(model, affinities)
    check_plan(model, plan, affinities)
    return plan


def test_diamond_is_cut_in_three():
    """A(CPU) -> B(OPENVINO) -> C(CPU) and A -> C: one CPU subgraph would need its own output first."""
    proto = _model(
        [
            helper.make_node("Relu", ["x"], ["a"], name="A"),
            helper.make_node("Neg", ["a"], ["b"], name="B"),
            helper.make_node("Add", ["a", "b"], ["c"], name="C"),
        ],
        ["x"],
        ["c"],
    )
    plan = _plan(proto, {"A": "CPU", "B": "OPENVINO", "C": "CPU"})
    assert [(s.device, s.nodes) for s in plan.subgraphs] == [
        ("CPU", ("A",)),
        ("OPENVINO", ("B",)),
        ("CPU", ("C",)),
    ]
    assert plan.subgraphs[2].inputs == ("a", "b") and plan.output_sources == {"c": 2}


def test_join_is_not_over_split():
    """x -> a(CPU) -> c(CPU) <- b(OPENVINO) <- y: no cycle, so two subgraphs."""
    proto = _model(
        [
            helper.make_node("Relu", ["x"], ["a"], name="a"),
            helper.make_node("Neg", ["y"], ["b"], name="b"),
            helper.make_node("Add", ["a", "b"], ["c"], name="c"),
        ],
        ["x", "y"],
        ["c"],
    )
    plan = _plan(proto, {"a": "CPU", "b": "OPENVINO", "c": "CPU"})
    assert sorted((s.device, s.nodes) for s in plan.subgraphs) == [("CPU", ("a", "c")), ("OPENVINO", ("b",))]
    assert plan.subgraphs[0].device == "OPENVINO"  # b must run before c


def _crossed_joins() -> tuple[onnx.ModelProto, dict[str, str]]:
    """p(CPU) -> r(CPU) and q(OPENVINO) -> s(OPENVINO), crossed by p -> s and q -> r. No path leaves a
    device and comes back, but {p, r} needs q and {q, s} needs p: two subgraphs would form a cycle."""
    proto = _model(
        [
            helper.make_node("Relu", ["x"], ["p"], name="p"),
            helper.make_node("Neg", ["y"], ["q"], name="q"),
            helper.make_node("Add", ["q", "p"], ["r"], name="r"),
            helper.make_node("Mul", ["q", "p"], ["s"], name="s"),
        ],
        ["x", "y"],
        ["r", "s"],
    )
    return proto, {"p": "CPU", "r": "CPU", "q": "OPENVINO", "s": "OPENVINO"}


def _shared_input_cycle() -> tuple[onnx.ModelProto, dict[str, str]]:
    """a1, a2 (CPU) both read x, as do b1, b2 (OPENVINO); a1 -> b2 and b1 -> a2. Grouping by the shared
    input makes CPU -> OPENVINO -> CPU a cycle."""
    proto = _model(
        [
            helper.make_node("Abs", ["x"], ["a1"], name="a1"),
            helper.make_node("Neg", ["x"], ["b1"], name="b1"),
            helper.make_node("Add", ["b1", "x"], ["a2"], name="a2"),
            helper.make_node("Mul", ["x", "a1"], ["b2"], name="b2"),
        ],
        ["x"],
        ["a2", "b2"],
    )
    return proto, {"a1": "CPU", "a2": "CPU", "b1": "OPENVINO", "b2": "OPENVINO"}


CYCLES = {"crossed_joins": _crossed_joins, "shared_input": _shared_input_cycle}


@pytest.mark.parametrize("build", CYCLES.values(), ids=list(CYCLES))
def test_cycle_between_groups_is_broken(build):
    """The plan is acyclic (three subgraphs), not an internal error."""
    proto, affinities = build()
    plan = _plan(proto, affinities)
    assert len(plan.subgraphs) == 3


def test_constant_only_nodes_are_copied_not_owned():
    """A Reshape of an initializer read by nodes on both devices: each subgraph gets its own copy."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [2, 3])
    flat = helper.make_tensor("flat", TensorProto.FLOAT, [6], [0.5] * 6)
    graph = helper.make_graph(
        [
            helper.make_node("Reshape", ["flat", "shape"], ["k"], name="k"),
            helper.make_node("Add", ["x", "k"], ["a"], name="a"),
            helper.make_node("Mul", ["a", "k"], ["b"], name="b"),
        ],
        "hand",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, [2, 3]) for o in ("b", "k")],
        initializer=[shape, flat],
    )
    proto = helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", OPSET)])
    plan = _plan(proto, {"k": "OPENVINO", "a": "CPU", "b": "OPENVINO"})
    assert [(s.device, s.nodes, s.constant_nodes) for s in plan.subgraphs] == [
        ("CPU", ("a",), ("k",)),
        ("OPENVINO", ("b",), ("k",)),
    ]
    assert plan.output_sources["k"] == "constant"


# --- full runs ----------------------------------------------------------------------------------------------


def _compile_and_check(
    case: Case, *, manual: bool, hint: str | None = None
) -> tuple[hetero_cli.CompiledModel, dict]:
    """Compile (manual affinities or automatic; ``hint``: PERFORMANCE_HINT, None for the default), check the
    plan and every exported subgraph, and return the compiled model with its results."""
    core = hetero_cli.Core()
    model = core.read_model(case.model)
    if manual:
        case.apply_affinities(model)
    compiled = core.compile_model(model, HETERO, {"PERFORMANCE_HINT": hint} if hint else None)
    affinities = case.affinity_map(model) if manual else dict(compiled.plan.affinities)
    check_plan(model, compiled.plan, affinities)
    for sub in compiled.plan.subgraphs:
        onnx.checker.check_model(subgraph_model(model, sub), full_check=True)
    got = compiled.create_infer_request().infer(case.feeds)
    assert list(got) == [o.name for o in case.model.graph.output]
    for name, value in case.feeds.items():
        if name in got:
            np.testing.assert_array_equal(got[name], value)
    return compiled, got


@requires_openvino
@WITH_SESSIONS
@given(cases(("CPU", "OPENVINO"), max_steps=12))
def test_manual_split_matches_one_session(case: Case):
    ref = reference(case.model, case.feeds)
    _, got = _compile_and_check(case, manual=True)
    for name, want in ref.items():
        np.testing.assert_allclose(got[name], want, err_msg=name, **case.tolerance(name))


@requires_openvino
@settings(WITH_SESSIONS, max_examples=25)
@given(cases(("CPU",), max_steps=12))
def test_all_cpu_is_bit_exact(case: Case):
    ref = reference(case.model, case.feeds)
    compiled, got = _compile_and_check(case, manual=True)
    assert len(compiled.subgraphs) <= 1
    for name, want in ref.items():
        np.testing.assert_array_equal(got[name], want, err_msg=name)


@requires_openvino
@WITH_SESSIONS
@given(cases(("CPU", "OPENVINO"), max_steps=12))
def test_split_with_only_exact_ops_on_openvino_is_bit_exact(case: Case):
    """Several subgraphs, but OpenVINO only runs value-exact ops: every bit must survive the cuts."""
    case.affinities = [
        device if node.op_type in EXACT_OPS else "CPU"
        for node, device in zip(case.model.graph.node, case.affinities, strict=True)
    ]
    ref = reference(case.model, case.feeds)
    _, got = _compile_and_check(case, manual=True)
    for name, want in ref.items():
        np.testing.assert_array_equal(got[name], want, err_msg=name)


@requires_openvino
@pytest.mark.parametrize("hint", ["LATENCY", "THROUGHPUT"])
@settings(WITH_SESSIONS, max_examples=40)
@given(cases(max_steps=10, refused=True))
def test_automatic_split_around_refused_ops(hint: str, case: Case):
    """IsInf, IsNaN and Hardmax have no OpenVINO kernel: automatic mode puts them on CPU, the rest where
    OpenVINO takes it, and the results are the model's, whether the split runs in the query's one session
    (LATENCY, where it placed every node as the plan does) or a session per subgraph (THROUGHPUT)."""
    ref = reference(case.model, case.feeds)
    compiled, got = _compile_and_check(case, manual=False, hint=hint)
    if hint == "THROUGHPUT":
        assert not compiled.one_session
    elif compiled.one_session:
        event("run in the query's one session")
        assert all(s.from_probe for s in compiled.subgraphs)
    model = compiled.model
    consts = constant_nodes(model)
    refused = [
        n
        for n in model.get_ops()
        if n.get_type_name() in case.refused_ops and n.get_friendly_name() not in consts
    ]
    for node in refused:
        assert compiled.plan.affinities[node.get_friendly_name()] == "CPU", node
    if refused:
        assert "CPU" in compiled.execution_devices
    event(f"devices {'+'.join(sorted(compiled.execution_devices))}, {len(compiled.subgraphs)} subgraph(s)")
    for name, want in ref.items():
        np.testing.assert_allclose(got[name], want, err_msg=name, **case.tolerance(name))


@requires_openvino
@settings(WITH_SESSIONS, max_examples=40)
@given(cases(max_steps=12, refused=True))
def test_claims_read_from_an_optimized_probe_never_take_refused_ops(case: Case):
    """Where the probe with ORT's graph optimizations answers (fused and folded nodes take the verdict of
    the nodes around them), it never gives the OpenVINO EP a live node of an op it refuses. (Its claims
    may differ from an unoptimized probe's elsewhere: the EP drops tiny clusters of the graph it is
    given, and the two graphs differ. test_automatic_split_around_refused_ops runs what it chose.)"""
    from hetero_cli.placement import query
    from hetero_cli.placement.devices import lookup

    model = Model(case.model)
    device = lookup("OPENVINO")
    wanted = {n.get_friendly_name() for n in model.get_ops() if not n.is_constant}
    proto = model.session_copy()
    optimized = query._optimized_claims(proto, model, device, wanted)
    if optimized is None:
        event("optimized probe gave up: probed again without optimizations")
        return
    assert optimized <= wanted
    live = _live_nodes(model)
    refused = {
        n.get_friendly_name()
        for n in model.get_ops()
        if n.get_type_name() in case.refused_ops and n.get_friendly_name() in wanted & live
    }
    assert not optimized & refused, sorted(optimized & refused)
    exact_session = query._probe_session(proto, model, device)
    exact = {name for ep, nodes in query.assignment(exact_session) if ep == device.ep for name, _ in nodes}
    event("same claims as without optimizations" if optimized == exact & wanted else "claims differ")


def _live_nodes(model: Model) -> set[str]:
    """Friendly names of the nodes some graph output depends on."""
    live: set[str] = set()
    todo = list(model.output_names)
    while todo:
        node = model.producer.get(todo.pop())
        if node is not None and node.get_friendly_name() not in live:
            live.add(node.get_friendly_name())
            todo.extend(node.inputs)
    return live


@requires_openvino
@pytest.mark.parametrize("swap", [False, True], ids=["as_built", "devices_swapped"])
@pytest.mark.parametrize("build", CYCLES.values(), ids=list(CYCLES))
def test_cycle_between_groups_compiles_and_runs(build, swap):
    proto, affinities = build()
    if swap:
        affinities = {k: "CPU" if v == "OPENVINO" else "OPENVINO" for k, v in affinities.items()}
    core = hetero_cli.Core()
    model = core.read_model(proto)
    model.set_affinities(affinities)
    ramp = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    feeds = {name: ramp * (k + 1) for k, name in enumerate(model.input_names)}
    got = core.compile_model(model, HETERO).create_infer_request().infer(feeds)
    for name, want in reference(proto, feeds).items():
        np.testing.assert_allclose(got[name], want, rtol=1e-6, err_msg=name)


def _overridable_initializer_model() -> onnx.ModelProto:
    """IR 8: initializer W is also a graph input, so a caller may feed another value (ORT honours it)."""
    w = helper.make_tensor("W", TensorProto.FLOAT, [2, 3], [0.5] * 6)
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["a"], name="a"),
            helper.make_node("Add", ["a", "W"], ["b"], name="b"),
            helper.make_node("Neg", ["W"], ["negw"], name="negw"),
            helper.make_node("Mul", ["b", "negw"], ["c"], name="c"),
        ],
        "overridable",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("x", "W")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("c", "negw", "W")],
        initializer=[w],
    )
    return helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 13)])


OVERRIDE_CASES = [("CPU", None), ("HETERO:CPU", None)]
if ACCELERATOR is not None:
    # the OpenVINO EP folds initializers and ignores a value fed for one: hetero-cli feeds them as inputs
    alternating = {"a": ACCELERATOR, "b": "CPU", "negw": ACCELERATOR, "c": "CPU"}
    OVERRIDE_CASES += [
        (ACCELERATOR, None),
        (SPLIT, None),
        (SPLIT, alternating),
        (SPLIT, dict.fromkeys("abc", ACCELERATOR) | {"negw": ACCELERATOR}),
    ]


@pytest.mark.parametrize("hint", ["LATENCY", "THROUGHPUT"])
@pytest.mark.parametrize("source", ["proto", "file"])
@pytest.mark.parametrize(
    ("device", "affinities"),
    OVERRIDE_CASES,
    ids=lambda v: "-".join(sorted(set(v.values()))) if isinstance(v, dict) else str(v),
)
@pytest.mark.parametrize("override", [False, True], ids=["default", "fed"])
def test_overridable_initializer_feeds_reach_every_output(
    tmp_path, device, affinities, source, hint, override
):
    """Values computed from an overridable initializer follow the fed value, like one ORT CPU session, on
    every device and split, whether the model comes as a proto or from its file (ORT loads that itself)."""
    proto = _overridable_initializer_model()
    feeds = {"x": np.ones((2, 3), np.float32)}
    if override:
        feeds["W"] = np.full((2, 3), 2.0, np.float32)
    core = hetero_cli.Core()
    if source == "file":
        onnx.save(proto, str(tmp_path / "m.onnx"))
    model = core.read_model(proto if source == "proto" else tmp_path / "m.onnx")
    if affinities:
        model.set_affinities(affinities)
    compiled = core.compile_model(model, device, {"PERFORMANCE_HINT": hint})
    request = compiled.create_infer_request()
    for _ in range(2):  # the default is fed again where the caller gives none
        got = request.infer(feeds)
        for name, want in reference(proto, feeds).items():
            np.testing.assert_allclose(got[name], want, rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("device", ["HETERO:CPU", *([SPLIT, ACCELERATOR] if ACCELERATOR else [])])
def test_an_initializer_output_of_a_model_read_from_its_file(tmp_path, device):
    """The whole model is not loaded from its file when an output is served without a session (the
    OpenVINO EP refuses an initializer as a graph output): the exported subgraph leaves it out."""
    w = helper.make_tensor("W", TensorProto.FLOAT, [4, 4], np.eye(4, dtype=np.float32).ravel())
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
            helper.make_node("Relu", ["m"], ["y"], name="relu"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in (("y", [2, 4]), ("W", [4, 4]))],
        initializer=[w],
    )
    proto = helper.make_model(graph, ir_version=9, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(proto, str(tmp_path / "m.onnx"))
    feeds = {"x": np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)}
    compiled = hetero_cli.Core().compile_model(tmp_path / "m.onnx", device, EXACT_F32)  # no TF32 on a GPU
    got = compiled.create_infer_request().infer(feeds)
    for name, want in reference(proto, feeds).items():
        np.testing.assert_allclose(got[name], want, rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("coordinates", [False, True], ids=["linear", "coordinates"])
def test_a_sparse_initializer_output_comes_back_dense(coordinates):
    """ORT hands a sparse initializer output over as a SparseTensor; hetero-cli, whose outputs are numpy
    arrays, as the dense array it stands for."""
    values = onnx.numpy_helper.from_array(np.array([1.5, -2.0, 3.0], np.float32), "W")
    index = np.array([[0, 1], [1, 1], [2, 2]] if coordinates else [1, 5, 10], np.int64)
    sparse = helper.make_sparse_tensor(values, onnx.numpy_helper.from_array(index, "W_idx"), [3, 4])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3, 4]) for n in ("y", "W")],
    )
    graph.sparse_initializer.append(sparse)
    proto = helper.make_model(graph, ir_version=9, opset_imports=[helper.make_opsetid("", 17)])
    got = (
        hetero_cli.Core()
        .compile_model(proto, "HETERO:CPU")
        .create_infer_request()
        .infer({"x": np.ones((3, 4), np.float32)})
    )
    want = np.zeros((3, 4), np.float32)
    want[0, 1], want[1, 1], want[2, 2] = 1.5, -2.0, 3.0
    np.testing.assert_array_equal(got["W"], want)
    np.testing.assert_array_equal(got["y"], np.ones((3, 4), np.float32))
