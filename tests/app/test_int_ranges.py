"""The ranges random integer inputs are drawn from (app/benchmark/int_ranges.py, issue 29 item 3): within
the data an input indexes (through the ops that pass its values on), masks all ones, else 0..9; the
ranges given by hand; and the one place random inputs are made (input_sets) for benchmark, validate and
tune alike."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as h
from support.embedding import embedding_model
from support.helpers import const, make_model, vi

import hetero_cli as hc
from hetero_cli.app import benchmark as bench
from hetero_cli.app.validate import validate_model
from hetero_cli.app.validate.run import input_sets_of
from hetero_cli.errors import BenchmarkError, ValidationError
from hetero_cli.graph import Model

INT64 = TensorProto.INT64
SHAPES = {"input_ids": (1, 8), "token_type_ids": (1, 8), "attention_mask": (1, 8)}


def _ranges(model: Model, given=None) -> dict[str, tuple[int, int]]:
    return {n: (r.low, r.high) for n, r in bench.integer_ranges(model, given).items()}


def test_bounds_of_the_embeddings_through_a_cast_unsqueeze_chain_and_the_mask_all_ones():
    ranges = bench.integer_ranges(Model(embedding_model()))
    assert {n: (r.low, r.high) for n, r in ranges.items()} == {
        "input_ids": (0, 49),
        "token_type_ids": (0, 1),  # behind Unsqueeze -> Cast -> Squeeze
        "attention_mask": (1, 1),
    }
    assert (
        "'type_table'" in ranges["token_type_ids"].why and "Gather 'type_emb'" in ranges["token_type_ids"].why
    )
    assert "mask" in ranges["attention_mask"].why


def test_input_sets_draw_within_the_ranges_and_validate_passes_on_the_cpu():
    model = Model(embedding_model())
    (feeds,) = bench.input_sets(model, SHAPES, {}, 1, seed=3)
    assert set(np.unique(feeds["token_type_ids"])) == {0, 1}
    assert feeds["input_ids"].min() >= 0 and feeds["input_ids"].max() <= 49
    assert feeds["input_ids"].max() > 9  # the whole table, not 0..9
    assert (feeds["attention_mask"] == 1).all()
    assert all(f.dtype == np.int64 for f in feeds.values())
    report = validate_model(hc.Core(), model, "CPU", seed=3)
    assert report.passed


def test_given_ranges_win_and_say_when_they_go_beyond_the_data():
    model = Model(embedding_model())
    (feeds,) = bench.input_sets(model, SHAPES, {}, 1, int_ranges={"attention_mask": (0, 1)})
    assert set(np.unique(feeds["attention_mask"])) == {0, 1}
    assert _ranges(model, {"input_ids": (5, 5)})["input_ids"] == (5, 5)
    # made as another type (-iop), converted: still within the range
    made_as = {"token_type_ids": np.dtype(np.float32), "input_ids": np.dtype(np.uint8)}
    (feeds,) = bench.input_sets(model, SHAPES, {}, 1, made_as=made_as)
    assert set(np.unique(feeds["token_type_ids"])) == {0, 1} and feeds["token_type_ids"].dtype == np.int64
    assert feeds["input_ids"].max() <= 49
    ranges = bench.integer_ranges(model, {"token_type_ids": (0, 2), "input_ids": (0, 3)})
    assert ranges["token_type_ids"].why.startswith("given; beyond 0..1")
    assert ranges["input_ids"].why == "given"


def _model(nodes, inputs, initializers=(), outputs=None):
    outputs = [vi("y", None)] if outputs is None else outputs
    return Model(make_model(nodes, inputs, outputs, list(initializers)))


def test_the_other_indexing_ops_and_declared_shapes():
    rng = np.random.default_rng(0)
    nodes = [
        # GatherElements with a negative axis into a graph input's declared shape: 5 along axis 1
        h.make_node("GatherElements", ["data", "ge"], ["a"], name="ge", axis=-1),
        # GatherND's index tuples of depth 2 span axes 0..1 of a [7, 3, 9] table: at most 3
        h.make_node("GatherND", ["table", "nd"], ["b"], name="nd"),
        # Gather along axis 1 of a Constant [4, 6]
        h.make_node("Constant", [], ["c6"], name="c6", value=const("v", rng.standard_normal((4, 6)))),
        h.make_node("Gather", ["c6", "g1"], ["c"], name="g1", axis=1),
        # indices read by two Gathers: the smaller bound holds
        h.make_node("Flatten", ["two"], ["two_f"], name="flat"),
        h.make_node("Gather", ["table", "two_f"], ["d"], name="g7"),
        h.make_node("Gather", ["c6", "two"], ["e"], name="g4"),
        # an int8 index into a 1000-row table: the type's own range
        h.make_node("Gather", ["big", "small"], ["f"], name="gbig"),
        # an index whose data has a dynamic dimension: the default
        h.make_node("Gather", ["dyn", "free"], ["g"], name="gdyn"),
        # values changed on the way (Add): no bound, the default
        h.make_node("Add", ["shifted", "one"], ["plus"], name="add"),
        h.make_node("Gather", ["c6", "plus"], ["p"], name="gplus"),
    ]
    inputs = [
        vi("data", [2, 5]),
        vi("dyn", ["n", 3]),
        vi("ge", [2, 5], INT64),
        vi("nd", [4, 2], INT64),
        vi("g1", [3], INT64),
        vi("two", [2, 2], INT64),
        vi("small", [3], TensorProto.INT8),
        vi("free", [3], INT64),
        vi("shifted", [3], INT64),
    ]
    inits = [
        const("table", rng.standard_normal((7, 3, 9))),
        const("big", rng.standard_normal((1000, 2))),
        const("one", 1, np.int64),
    ]
    outputs = [vi(n, None) for n in "abcdefgp"]
    assert _ranges(_model(nodes, inputs, inits, outputs)) == {
        "ge": (0, 4),
        "nd": (0, 2),
        "g1": (0, 5),
        "two": (0, 3),
        "small": (0, 127),
        "free": (0, 9),
        "shifted": (0, 9),
    }


def test_masks_by_name_and_by_use_booleans_and_uint8():
    nodes = [
        h.make_node("Cast", ["keep"], ["keep_b"], name="to_bool", to=TensorProto.BOOL),
        h.make_node("Where", ["keep_b", "x", "zero"], ["a"], name="where"),
        h.make_node("Where", ["flag", "x", "zero"], ["b"], name="where_flag"),
        h.make_node("Cast", ["pad_mask"], ["pm"], name="pm", to=TensorProto.FLOAT),
        h.make_node("Cast", ["ints"], ["if"], name="if", to=TensorProto.FLOAT),
        h.make_node("Cast", ["pixels"], ["pf"], name="pf", to=TensorProto.FLOAT),
        h.make_node("Cast", ["bits"], ["bf"], name="bf", to=TensorProto.FLOAT),
    ]
    inputs = [
        vi("x", [3]),
        vi("keep", [3], INT64),
        vi("flag", [3], TensorProto.BOOL),
        vi("pad_mask", [3], TensorProto.INT32),
        vi("ints", [3], INT64),
        vi("pixels", [3], TensorProto.UINT8),
        vi("bits", [3], TensorProto.BOOL),
    ]
    outputs = [vi(n, None) for n in ("a", "b", "pm", "if", "pf", "bf")]
    model = _model(nodes, inputs, [const("zero", 0.0)], outputs)
    assert _ranges(model) == {
        "keep": (1, 1),  # cast to bool for a Where
        "flag": (1, 1),  # a Where's condition
        "pad_mask": (1, 1),  # named like a mask
        "ints": (0, 9),
        "pixels": (0, 255),
        "bits": (0, 1),
    }
    (feeds,) = bench.input_sets(model, {i.name: (3,) for i in model.inputs}, {}, 1)
    assert feeds["flag"].dtype == np.bool_ and feeds["flag"].all()


def test_parse_int_ranges():
    model = Model(embedding_model())
    values = ["input_ids:3,7", "token_type_ids: 0 , 1", "input_ids:-2,4"]
    assert bench.parse_int_ranges(values, model) == {"input_ids": (-2, 4), "token_type_ids": (0, 1)}
    one = _model([h.make_node("Cast", ["ids"], ["y"], to=TensorProto.FLOAT)], [vi("ids", [2], INT64)])
    assert bench.parse_int_ranges(["4,5"], one) == {"ids": (4, 5)}


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("token_type_ids:5,2", "LO 5 is over HI 2"),
        ("token_type_ids:a,b", "write NAME:LO,HI with two integers"),
        ("token_type_ids:0.5,1", "write NAME:LO,HI with two integers"),
        ("token_type_ids:1", "write NAME:LO,HI with two integers"),
        ("token_type_ids:1,2,3", "write NAME:LO,HI with two integers"),
        ("0,1", "write NAME:LO,HI"),  # several integer inputs: the name is needed
        ("nope:0,1", "'nope' is not an input of the model; its integer inputs: input_ids, token_type_ids"),
        ("x:0,1", "takes float32, not integers"),
        ("small:0,300", "is int8, which holds -128..127"),
    ],
)
def test_bad_int_ranges_are_refused(value, words):
    proto = embedding_model()
    proto.graph.input.extend([vi("x", [1]), vi("small", [1], TensorProto.INT8)])
    proto.graph.node.extend([h.make_node("Cast", ["small"], ["sf"], to=TensorProto.FLOAT)])
    proto.graph.output.extend([vi("x", [1]), vi("sf", [1])])
    with pytest.raises(BenchmarkError, match=r"^--int-range ") as info:
        bench.parse_int_ranges([value], Model(proto))
    assert words in str(info.value)


def test_the_api_refuses_bad_ranges_and_ranges_beside_given_inputs():
    model = Model(embedding_model())
    with pytest.raises(ValidationError, match=r"int_ranges\['token_type_ids'\]: LO 3 is over HI 1"):
        validate_model(hc.Core(), model, "CPU", int_ranges={"token_type_ids": (3, 1)})
    with pytest.raises(ValidationError, match="is no \\(LO, HI\\) pair of integers"):
        input_sets_of(model, None, None, 0, {"input_ids": (0.5, 2)})
    feeds = bench.input_sets(model, SHAPES, {}, 1)
    with pytest.raises(ValidationError, match="leave them out with given inputs"):
        input_sets_of(model, feeds, None, 0, {"input_ids": (0, 2)})
