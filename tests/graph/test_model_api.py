"""The OpenVINO-shaped model API: ops, friendly names, rt_info, save/read, query_model, affinity errors."""

from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h
from support.helpers import (
    HAS_OPENVINO,
    OPENVINO_ONLY,
    assert_same,
    chain_model,
    hardmax_model,
    isinf_model,
    make_model,
    needs_openvino,
    ort_run,
    seeded,
    vi,
)

import hetero_cli as hc
from hetero_cli.ort.session import observe_sessions


def names(model: hc.Model) -> list[str]:
    return [n.get_friendly_name() for n in model.get_ops()]


# --- get_ops and friendly names ---------------------------------------------------------------------------


def test_get_ops_is_topological_when_the_file_is_not():
    # the file lists the nodes last-first
    nodes = [
        h.make_node("Sigmoid", ["c"], ["y"], name="last"),
        h.make_node("Add", ["a", "b"], ["c"], name="join"),
        h.make_node("Neg", ["x"], ["b"], name="right"),
        h.make_node("Relu", ["x"], ["a"], name="left"),
    ]
    model = hc.Core().read_model(make_model(nodes, [vi("x")], [vi("y")]))
    order = names(model)
    assert sorted(order) == ["join", "last", "left", "right"]
    position = {n: i for i, n in enumerate(order)}
    assert position["left"] < position["join"]
    assert position["right"] < position["join"]
    assert position["join"] < position["last"]
    # and it runs
    x = seeded((2,))
    compiled = hc.Core().compile_model(model, "CPU")
    assert_same(compiled({"x": x}), ort_run(model.proto, {"x": x}))


def test_get_ops_keeps_a_valid_file_order():
    model = hc.Core().read_model(chain_model(("Relu", "Neg", "Abs", "Sigmoid", "Tanh")))
    assert names(model) == ["n0", "n1", "n2", "n3", "n4"]


def test_get_ops_counts_if_body_reads_as_dependencies():
    then_g = h.make_graph([h.make_node("Identity", ["late"], ["t"])], "then", [], [vi("t")])
    else_g = h.make_graph([h.make_node("Neg", ["late"], ["e"])], "else", [], [vi("e")])
    nodes = [
        h.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g, else_branch=else_g),
        h.make_node("Relu", ["x"], ["late"], name="producer"),  # read only inside the If's bodies
    ]
    model = hc.Core().read_model(make_model(nodes, [vi("x"), vi("cond", [1], TensorProto.BOOL)], [vi("y")]))
    assert names(model) == ["producer", "if"]


def test_friendly_names_unique_and_derived():
    nodes = [
        h.make_node("Abs", ["x"], ["a"], name="dup"),
        h.make_node("Relu", ["a"], ["b"], name="dup"),  # duplicate names: both derived from outputs
        h.make_node("Neg", ["b"], ["c"], name=""),  # unnamed, derived "c" collides with the node named "c"
        h.make_node("Sigmoid", ["c"], ["d"], name="c"),
        h.make_node("Tanh", ["d"], ["y"]),  # unnamed
    ]
    proto = make_model(nodes, [vi("x")], [vi("y")])
    model = hc.Core().read_model(proto)
    got = {n.get_type_name(): n.get_friendly_name() for n in model.get_ops()}
    assert got["Abs"] == "a"
    assert got["Relu"] == "b"
    assert got["Sigmoid"] == "c"  # a unique name is kept as is
    assert got["Tanh"] == "y"
    assert got["Neg"] not in {"a", "b", "c", "y"}
    assert got["Neg"].startswith("c")
    assert len(set(got.values())) == 5
    # deterministic: the same file gives the same names
    again = hc.Core().read_model(proto.SerializeToString())
    assert names(again) == names(model)
    # and the engine copes with names ORT itself refuses (two nodes called "dup")
    x = seeded((2,))
    plain = onnx.ModelProto()
    plain.CopyFrom(proto)
    for node in plain.graph.node:
        node.name = ""
    compiled = hc.Core().compile_model(model, "HETERO:CPU")
    assert compiled.subgraphs[0].nodes == tuple(names(model))
    assert_same(compiled({"x": x}), ort_run(plain, {"x": x}))


def test_friendly_name_collision_with_a_name_derived_twice():
    nodes = [
        h.make_node("Relu", ["x"], ["t"], name=""),
        h.make_node("Neg", ["t"], ["u"], name="t"),
        h.make_node("Abs", ["u"], ["v"], name="t_1"),
        h.make_node("Sigmoid", ["v"], ["y"], name="y"),
    ]
    model = hc.Core().read_model(make_model(nodes, [vi("x")], [vi("y")]))
    got = names(model)
    assert got[1:] == ["t", "t_1", "y"]
    assert got[0] not in got[1:]
    assert got[0].startswith("t")


def test_friendly_names_reach_ort_for_unnamed_nodes():
    nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node("Neg", ["a"], ["y"])]
    model = hc.Core().read_model(make_model(nodes, [vi("x")], [vi("y")]))
    assert names(model) == ["a", "y"]
    assert hc.Core().query_model(model, "CPU") == {"a": "CPU", "y": "CPU"}
    compiled = hc.Core().compile_model(model, "HETERO:CPU")
    assert compiled.subgraphs[0].nodes == ("a", "y")


def test_get_type_name():
    nodes = [
        h.make_node("Relu", ["x"], ["a"], name="relu"),
        h.make_node("FastGelu", ["a"], ["y"], name="gelu", domain="com.microsoft"),
    ]
    model = hc.Core().read_model(make_model(nodes, [vi("x")], [vi("y")], opsets={"": 17, "com.microsoft": 1}))
    relu, gelu = model.get_ops()
    assert relu.get_type_name() == "Relu"
    assert gelu.get_type_name().endswith("FastGelu")


def test_rt_info_is_a_mutable_mapping_kept_on_the_node():
    model = hc.Core().read_model(chain_model())
    op = model.get_ops()[0]
    assert "affinity" not in op.get_rt_info()
    op.get_rt_info()["affinity"] = "CPU"
    assert model.get_ops()[0].get_rt_info()["affinity"] == "CPU"
    del model.get_ops()[0].get_rt_info()["affinity"]
    assert "affinity" not in op.get_rt_info()


# --- save / read ---------------------------------------------------------------------------------------------


def test_save_keeps_affinities_in_metadata_props(tmp_path):
    proto = chain_model()
    proto.graph.node[1].metadata_props.add(key="owner", value="someone")
    core = hc.Core()
    model = core.read_model(proto)
    for i, op in enumerate(model.get_ops()):
        op.get_rt_info()["affinity"] = "CPU" if i % 2 else "OPENVINO"
    path = tmp_path / "with_affinities.onnx"
    model.save(path)

    saved = onnx.load(str(path))
    for node in saved.graph.node:
        props = {p.key: p.value for p in node.metadata_props}
        assert props["affinity"] == ("CPU" if int(node.name[1:]) % 2 else "OPENVINO")
    assert {p.key: p.value for p in saved.graph.node[1].metadata_props}["owner"] == "someone"
    assert sum(p.key == "affinity" for p in saved.graph.node[1].metadata_props) == 1

    restored = core.read_model(path)
    assert {n.get_friendly_name(): n.get_rt_info()["affinity"] for n in restored.get_ops()} == {
        "n0": "OPENVINO",
        "n1": "CPU",
        "n2": "OPENVINO",
        "n3": "CPU",
    }


def test_save_twice_and_clear(tmp_path):
    core = hc.Core()
    model = core.read_model(chain_model())
    for op in model.get_ops():
        op.get_rt_info()["affinity"] = "CPU"
    model.save(tmp_path / "a.onnx")
    model.save(tmp_path / "a.onnx")
    again = core.read_model(tmp_path / "a.onnx")
    for node in onnx.load(str(tmp_path / "a.onnx")).graph.node:
        assert [p.key for p in node.metadata_props] == ["affinity"]
    for op in again.get_ops():
        del op.get_rt_info()["affinity"]
    again.save(tmp_path / "b.onnx")
    assert all(not n.metadata_props for n in onnx.load(str(tmp_path / "b.onnx")).graph.node)


def test_saved_affinities_drive_a_manual_compile(tmp_path):
    core = hc.Core()
    model = core.read_model(chain_model())
    for op in model.get_ops():
        op.get_rt_info()["affinity"] = "CPU"
    model.save(tmp_path / "m.onnx")
    compiled = core.compile_model(str(tmp_path / "m.onnx"), "HETERO:OPENVINO,CPU")
    assert [s.device for s in compiled.subgraphs] == ["CPU"]


def test_read_model_errors(tmp_path):
    core = hc.Core()
    with pytest.raises(hc.ModelError, match="not found"):
        core.read_model(tmp_path / "missing.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"\x00garbage")
    with pytest.raises(hc.ModelError):
        core.read_model(tmp_path / "junk.onnx")


# --- query_model --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hardmax():
    return hardmax_model()


def test_query_plain_cpu_returns_every_node(hardmax):
    result = hc.Core().query_model(hardmax, "CPU")
    assert result == dict.fromkeys(["matmul", "add_bias", "relu", "hardmax", "pick", "sigmoid"], "CPU")


@needs_openvino
def test_query_hetero_is_greedy_in_priority_order(hardmax):
    result = hc.Core().query_model(hardmax, "HETERO:OPENVINO,CPU")
    assert result == {
        "matmul": "OPENVINO",
        "add_bias": "OPENVINO",
        "relu": "OPENVINO",
        "hardmax": "CPU",
        "pick": "OPENVINO",
        "sigmoid": "OPENVINO",
    }
    assert list(result) == names(hc.Core().read_model(hardmax))


@needs_openvino
def test_query_plain_device_returns_what_it_alone_supports(hardmax):
    result = hc.Core().query_model(hardmax, "OPENVINO")
    assert "hardmax" not in result
    assert set(result) == {"matmul", "add_bias", "relu", "pick", "sigmoid"}
    assert set(result.values()) == {"OPENVINO"}


@needs_openvino
def test_query_ignores_affinities_set_by_the_user(hardmax):
    model = hc.Core().read_model(hardmax)
    for op in model.get_ops():
        op.get_rt_info()["affinity"] = "CPU"
    assert hc.Core().query_model(model, "HETERO:OPENVINO,CPU")["matmul"] == "OPENVINO"


@needs_openvino
def test_query_never_raises_for_nodes_no_device_supports():
    result = hc.Core().query_model(isinf_model(), "HETERO:OPENVINO")
    assert "isinf" not in result
    assert result["relu"] == "OPENVINO"


@needs_openvino
def test_query_cost_grows_with_devices_not_nodes():
    proto = chain_model(("Relu", "Neg", "Abs", "Sigmoid", "Tanh", "Exp") * 5)
    model = hc.Core().read_model(proto)
    created = []
    with observe_sessions(created.append):
        result = hc.Core().query_model(model, "HETERO:OPENVINO,CPU")
    assert len(result) == 30
    assert len(created) <= 4  # one probe per device (and a little slack), never one per node


# --- nodes a device has no kernel for ------------------------------------------------------------------------


def custom_op_model() -> onnx.ModelProto:
    nodes = [
        h.make_node("Relu", ["x"], ["a"], name="relu"),
        h.make_node("Mystery", ["a"], ["b"], name="mystery", domain="com.example"),
        h.make_node("Neg", ["b"], ["y"], name="neg"),
    ]
    return make_model(nodes, [vi("x")], [vi("y")], opsets={"": 17, "com.example": 1}, value_info=[vi("b")])


@pytest.mark.parametrize(
    "device", ["CPU", "HETERO:CPU", pytest.param("HETERO:OPENVINO,CPU", marks=OPENVINO_ONLY)]
)
def test_custom_domain_op_does_not_break_the_cpu_probe(device):
    result = hc.Core().query_model(custom_op_model(), device)
    assert "mystery" not in result
    assert result["relu"] in {"CPU", "OPENVINO"}
    assert result["neg"] in {"CPU", "OPENVINO"}


def test_custom_domain_op_refused_by_compile_naming_it():
    with pytest.raises(hc.UnsupportedNodesError) as err:
        hc.Core().compile_model(custom_op_model(), "HETERO:CPU")
    assert "mystery" in str(err.value)
    assert "Mystery" in str(err.value)
    assert "CPU" in str(err.value)


def fp16_relu_model() -> onnx.ModelProto:
    f16 = TensorProto.FLOAT16
    nodes = [
        h.make_node("Identity", ["x"], ["a"], name="first"),
        h.make_node("Relu", ["a"], ["b"], name="relu16"),  # the CPU EP has no float16 Relu kernel
        h.make_node("Identity", ["b"], ["y"], name="last"),
    ]
    return make_model(nodes, [vi("x", [2, 3], f16)], [vi("y", [2, 3], f16)])


def test_op_at_a_type_the_cpu_ep_runs_through_inserted_casts_is_supported_on_cpu():
    # No float16 Relu kernel, but ORT's CPU session runs it through Cast nodes it inserts itself:
    # whatever a plain ORT CPU session runs, the CPU device supports.
    result = hc.Core().query_model(fp16_relu_model(), "CPU")
    assert result == {"first": "CPU", "relu16": "CPU", "last": "CPU"}


def test_fp16_model_runs_where_a_plain_cpu_session_runs_it():
    core = hc.Core()
    compiled = core.compile_model(fp16_relu_model(), "HETERO:CPU")
    assert [s.device for s in compiled.subgraphs] == ["CPU"]
    x = seeded((2, 3), np.float16)
    np.testing.assert_array_equal(compiled({"x": x})["y"], np.maximum(x, 0))


# --- manual mode errors --------------------------------------------------------------------------------------


def test_some_nodes_missing_an_affinity():
    model = hc.Core().read_model(chain_model())
    ops = model.get_ops()
    ops[0].get_rt_info()["affinity"] = "CPU"
    ops[2].get_rt_info()["affinity"] = "CPU"
    with pytest.raises(hc.AffinityError) as err:
        hc.Core().compile_model(model, "HETERO:CPU")
    message = str(err.value)
    assert "n1" in message
    assert "n3" in message


def test_affinity_outside_the_priority_list():
    model = hc.Core().read_model(chain_model())
    for op in model.get_ops():
        op.get_rt_info()["affinity"] = "CPU"
    model.get_ops()[2].get_rt_info()["affinity"] = "OPENVINO"
    with pytest.raises(hc.AffinityError) as err:
        hc.Core().compile_model(model, "HETERO:CPU")
    assert "n2" in str(err.value)
    assert "OPENVINO" in str(err.value)


def test_affinity_naming_an_unknown_device():
    model = hc.Core().read_model(chain_model())
    for op in model.get_ops():
        op.get_rt_info()["affinity"] = "CPU"
    model.get_ops()[1].get_rt_info()["affinity"] = "FPGA"
    with pytest.raises(hc.AffinityError) as err:
        hc.Core().compile_model(model, "HETERO:CPU")
    assert "n1" in str(err.value)
    assert "FPGA" in str(err.value)


def test_affinities_are_case_insensitive_device_names():
    model = hc.Core().read_model(chain_model())
    for op in model.get_ops():
        op.get_rt_info()["affinity"] = "cpu"
    compiled = hc.Core().compile_model(model, "HETERO:CPU")
    assert [s.device for s in compiled.subgraphs] == ["CPU"]


@needs_openvino
def test_manual_affinities_force_any_split():
    proto = chain_model()
    model = hc.Core().read_model(proto)
    for op, dev in zip(model.get_ops(), ["CPU", "OPENVINO", "CPU", "OPENVINO"], strict=True):
        op.get_rt_info()["affinity"] = dev
    compiled = hc.Core().compile_model(model, "HETERO:OPENVINO,CPU")
    assert [(s.device, s.nodes) for s in compiled.subgraphs] == [
        ("CPU", ("n0",)),
        ("OPENVINO", ("n1",)),
        ("CPU", ("n2",)),
        ("OPENVINO", ("n3",)),
    ]
    x = seeded((2, 3))
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}), exact=False)


# --- automatic mode: unsupported nodes --------------------------------------------------------------------


@needs_openvino
def test_automatic_mode_refuses_nodes_no_listed_device_supports():
    with pytest.raises(hc.UnsupportedNodesError) as err:
        hc.Core().compile_model(isinf_model(), "HETERO:OPENVINO")
    message = str(err.value)
    assert "isinf" in message
    assert "IsInf" in message
    assert "OPENVINO" in message


@needs_openvino
def test_plain_openvino_runs_one_session_and_warns_about_cpu_fallback(caplog):
    caplog.set_level(logging.WARNING, logger="hetero_cli")
    proto = isinf_model()
    compiled = hc.Core().compile_model(proto, "OPENVINO")
    assert len(compiled.subgraphs) == 1
    sub = compiled.subgraphs[0]
    assert sub.device == "OPENVINO"
    fallback = {name: (op, ep) for name, op, ep in sub.fallback_nodes}
    assert fallback["isinf"] == ("IsInf", "CPUExecutionProvider")
    assert "isinf" in sub.description
    assert "CPUExecutionProvider" in sub.description
    assert any("isinf" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    x = np.array([[1.0, np.inf, -2.0], [0.5, -np.inf, 3.0]], np.float32)
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}), exact=False)


def test_whole_model_compile_on_cpu_has_no_fallback():
    compiled = hc.Core().compile_model(isinf_model(), "CPU")
    assert compiled.subgraphs[0].fallback_nodes == []


def test_openvino_flavour_flag_is_consistent():
    assert ("OPENVINO" in hc.Core().available_devices) == HAS_OPENVINO


def test_model_inputs_and_outputs_info():
    model = hc.Core().read_model(hardmax_model())
    assert [(i.name, i.dtype, i.shape) for i in model.inputs] == [("x", np.dtype(np.float32), (2, 4))]
    assert [o.get_any_name() for o in model.outputs] == ["y"]
