"""A model's own faults found when it is read, before any execution provider sees it: tensors whose data
does not fit their shape and type, ops ONNX does not define (in the model's opset), op versions older than
ONNX Runtime supports. Each is a ModelError: exit 2 and one line from benchmark, validate and tune, that
says what to fix in the model, not a device's failure (exit 1, "move its nodes").
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h
from support.helpers import SPLIT, const, make_model, vi
from support.robust import invoke, nothing_left_behind, one_error_line

import hetero_cli as hc
from hetero_cli.cli import hetero
from hetero_cli.graph import reading
from hetero_cli.graph.reading import SKELETON_MIN_BYTES

COMMANDS = {
    "benchmark": ["benchmark", "-d", SPLIT, "-niter", "1"],
    "validate": ["validate", "-d", SPLIT],
    "tune": ["tune", "-d", SPLIT],
}


def _add_model(w: onnx.TensorProto, shape=(4, 4), opset: int = 17) -> onnx.ModelProto:
    """x + w -> y, w the initializer given."""
    nodes = [h.make_node("Add", ["x", "w"], ["y"], name="add")]
    return make_model(nodes, [vi("x", shape)], [vi("y", shape)], [w], opsets={"": opset})


def _raw(size_change: int, shape=(4, 4)) -> onnx.TensorProto:
    """A float32 initializer 'w' of ``shape`` whose raw_data is ``size_change`` bytes longer (or shorter)."""
    w = const("w", np.ones(shape))
    data = w.raw_data
    w.raw_data = data[:size_change] if size_change < 0 else data + b"\0" * size_change
    return w


def _typed(count: int) -> onnx.TensorProto:
    """A float32 [4, 4] initializer 'w' with ``count`` values in float_data."""
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 4])
    w.float_data.extend([1.0] * count)
    return w


def _damaged_constant() -> onnx.ModelProto:
    """x + c -> y, c a Constant node whose value holds 8 bytes for a [4, 4] float32 tensor."""
    value = _raw(-56)
    value.name = "c_value"
    nodes = [
        h.make_node("Constant", [], ["c"], name="c", value=value),
        h.make_node("Add", ["x", "c"], ["y"], name="add"),
    ]
    return make_model(nodes, [vi("x", [4, 4])], [vi("y", [4, 4])])


BROKEN_TENSORS = {
    "raw data cut short": (
        _add_model(_raw(-52)),
        "initializer 'w' holds 12 bytes of raw_data where its shape [4, 4] of float32 needs 64",
    ),
    "raw data too long": (
        _add_model(_raw(8)),
        "initializer 'w' holds 72 bytes of raw_data where its shape [4, 4] of float32 needs 64",
    ),
    # over SKELETON_MIN_BYTES: read without its weights' bytes, whose length the file walk reports
    "a large weight cut short": (
        _add_model(_raw(-100, (512, 1024)), (512, 1024)),
        "initializer 'w' holds 2097052 bytes of raw_data where its shape [512, 1024] of float32 needs 2097152",
    ),
    "too few typed values": (
        _add_model(_typed(3)),
        "initializer 'w' holds 3 value(s) in float_data where its shape [4, 4] of float32 needs 16",
    ),
    "no data": (
        _add_model(_typed(0)),
        "initializer 'w' holds no data where its shape [4, 4] of float32 needs 16 value(s)",
    ),
    "a Constant's value": (
        _damaged_constant(),
        "tensor 'c_value' holds 8 bytes of raw_data where its shape [4, 4] of float32 needs 64",
    ),
}


def _gelu_at_17() -> onnx.ModelProto:
    return make_model([h.make_node("Gelu", ["x"], ["y"], name="gelu")], [vi("x", [4])], [vi("y", [4])])


def _unknown_op() -> onnx.ModelProto:
    return make_model([h.make_node("Frobnicate", ["x"], ["y"], name="frob")], [vi("x", [4])], [vi("y", [4])])


def _unknown_ml_op() -> onnx.ModelProto:
    node = h.make_node("Frobnicate", ["x"], ["y"], name="frob", domain="ai.onnx.ml")
    return make_model([node], [vi("x", [4])], [vi("y", [4])], opsets={"": 17, "ai.onnx.ml": 3})


def _ml_op_without_its_opset() -> onnx.ModelProto:
    node = h.make_node("Normalizer", ["x"], ["y"], name="norm", domain="ai.onnx.ml", norm="MAX")
    return make_model([node], [vi("x", [1, 4])], [vi("y", [1, 4])])


def _unknown_op_in_a_body() -> onnx.ModelProto:
    """An If whose then-branch holds an op ONNX does not define."""

    def branch(op: str) -> onnx.GraphProto:
        return h.make_graph([h.make_node(op, ["x"], ["b"], name=f"{op}_in_branch")], op, [], [vi("b", [4])])

    nodes = [
        h.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
        h.make_node("Greater", ["s", "zero"], ["c"], name="cond"),
        h.make_node(
            "If", ["c"], ["y"], name="if", then_branch=branch("Frobnicate"), else_branch=branch("Neg")
        ),
    ]
    return make_model(nodes, [vi("x", [4])], [vi("y", [4])], [const("zero", 0.0)])


BROKEN_OPS = {
    "an op of opset 1 ORT has no kernel for": (
        _add_model(const("w", np.ones((4, 4))), opset=1),
        "node 'add' (Add) is Add-1 (the model's opset 1), older than ONNX Runtime supports (opset 7 and later, "
        "where Add is Add-7): convert the model to opset 7 or later",
    ),
    "an op the default domain does not define": (
        _unknown_op(),
        "node 'frob' (Frobnicate) names no ONNX operator ('Frobnicate' is not defined in the default domain)",
    ),
    "an op ai.onnx.ml does not define": (
        _unknown_ml_op(),
        "node 'frob' (Frobnicate) names no ONNX operator ('Frobnicate' is not defined in domain 'ai.onnx.ml')",
    ),
    "an op newer than the model's opset": (
        _gelu_at_17(),
        "node 'gelu' (Gelu) uses Gelu, which does not exist in opset 17 (ONNX added it in opset 20): convert "
        "the model to opset 20 or later",
    ),
    "a domain the model imports no opset of": (
        _ml_op_without_its_opset(),
        "node 'norm' (Normalizer) is in domain 'ai.onnx.ml', of which the model imports no opset",
    ),
    "an unknown op inside an If": (
        _unknown_op_in_a_body(),
        "node 'Frobnicate_in_branch' (Frobnicate) names no ONNX operator",
    ),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("proto", "words"), [*BROKEN_TENSORS.values(), *BROKEN_OPS.values()], ids=[*BROKEN_TENSORS, *BROKEN_OPS]
)
def test_a_models_own_fault_is_exit_2_and_one_line_from_every_command(tmp_path, command, proto, words):
    path = tmp_path / "m.onnx"
    onnx.save(proto, str(path))
    args = [*COMMANDS[command], "-m", path]
    if command == "tune":
        args += ["--save", tmp_path / "tuned.onnx"]
    with nothing_left_behind(tmp_path):
        result = invoke(hetero, *args)
    assert result.exit_code == 2, result.output
    line = one_error_line(result)
    assert words in line, line
    assert "move its nodes" not in line and "device" not in line


def test_a_large_weight_is_checked_without_reading_its_bytes(tmp_path, monkeypatch):
    """A file over SKELETON_MIN_BYTES is parsed without its large weights' bytes: the size check goes by
    the raw_data lengths the file walk reports (onnx.load, which would read them, is not called)."""
    proto, words = BROKEN_TENSORS["a large weight cut short"]
    path = tmp_path / "m.onnx"
    onnx.save(proto, str(path))
    assert path.stat().st_size >= SKELETON_MIN_BYTES
    monkeypatch.setattr(reading.onnx, "load", None)  # a call would fail with a TypeError
    with pytest.raises(hc.ModelError) as err:
        hc.Core().read_model(path)
    assert words in str(err.value)


@pytest.mark.parametrize(("proto", "words"), BROKEN_TENSORS.values(), ids=list(BROKEN_TENSORS))
def test_read_model_refuses_a_damaged_tensor_given_as_bytes(proto, words):
    with pytest.raises(hc.ModelError, match="the model given as bytes") as err:
        hc.Core().read_model(proto.SerializeToString())
    assert words in str(err.value)


def test_an_op_of_an_old_opset_that_did_not_change_since_is_read():
    """Relu at opset 6 is Relu-6, the version opset 7 still has: ORT runs it (the onnx wheel's
    pytorch-operator models are opset 6), so it is no model fault."""
    proto = make_model(
        [h.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [4])], [vi("y", [4])], opsets={"": 6}
    )
    model = hc.Core().read_model(proto)
    assert [n.friendly_name for n in model.get_ops()] == ["relu"]


def test_the_first_opset_of_each_op_is_onnxs_and_found_without_every_schema(monkeypatch):
    """first_version walks one op's schemas back from its newest: the same answer as the whole history,
    which a read no longer builds (10 MiB held for the process's life)."""
    from hetero_cli.graph import operators

    first: dict[tuple[str, str], int] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain in ("", "ai.onnx.ml"):
            key = (schema.name, schema.domain)
            first[key] = min(first.get(key, schema.since_version), schema.since_version)
    assert {key: operators.first_version(*key) for key in first} == first
    assert operators.first_version("NoSuchOp", "") is None

    def refuse():
        raise AssertionError("a read built every schema")

    monkeypatch.setattr(onnx.defs, "get_all_schemas_with_history", refuse)
    proto = make_model([h.make_node("Gelu", ["x"], ["y"], name="gelu")], [vi("x", [4])], [vi("y", [4])])
    with pytest.raises(hc.ModelError, match="ONNX added it in opset 20"):
        hc.Core().read_model(proto)


@pytest.mark.parametrize(
    ("dtype", "shape"),
    [(TensorProto.INT4, [5]), (TensorProto.COMPLEX64, [3]), (TensorProto.STRING, [2])],
    ids=["int4", "complex64", "string"],
)
def test_typed_data_of_packed_complex_and_string_tensors_is_counted_right(dtype, shape):
    """int4 packs two to an int32_data entry, a complex64 takes two float_data values, a string one."""
    values = {
        TensorProto.INT4: [1, 2, 3, 4, 5],
        TensorProto.COMPLEX64: [1 + 2j, 3, 4j],
        TensorProto.STRING: [b"a", b"b"],
    }
    proto = make_model(
        [h.make_node("Identity", ["c"], ["y"], name="id")],
        [],
        [vi("y", shape, dtype)],
        [h.make_tensor("c", dtype, shape, values[dtype])],
    )
    hc.Core().read_model(proto)  # no error
    init = proto.graph.initializer[0]
    field = {TensorProto.STRING: init.string_data, TensorProto.COMPLEX64: init.float_data}.get(
        dtype, init.int32_data
    )
    field.pop()
    with pytest.raises(hc.ModelError, match="initializer 'c' holds"):
        hc.Core().read_model(proto)


def test_an_external_tensor_whose_length_does_not_fit_its_shape_is_exit_2(tmp_path):
    """External data lengths are checked with their files (graph.external), from the command line too."""
    proto = _add_model(const("w", np.ones((4, 4))))
    onnx.save(
        proto, str(tmp_path / "m.onnx"), save_as_external_data=True, location="m.data", size_threshold=0
    )
    proto = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    entry = next(e for e in proto.graph.initializer[0].external_data if e.key == "length")
    entry.value = "12"
    onnx.save(proto, str(tmp_path / "m.onnx"))
    result = invoke(hetero, *COMMANDS["benchmark"], "-m", tmp_path / "m.onnx")
    assert result.exit_code == 2
    assert "says 12 bytes in 'm.data' but its shape and type need 64" in one_error_line(result)
