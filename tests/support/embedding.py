"""A BERT-like embedding model for the random-integer-input tests (issue 29, item 3)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as h

from support.helpers import const, make_model, vi

INT64 = TensorProto.INT64
INPUTS = ("input_ids", "token_type_ids", "attention_mask")


def embedding_model() -> onnx.ModelProto:
    """input_ids, token_type_ids and attention_mask, int64 [1,8]: input_ids index a 50-row word table;
    token_type_ids go through Unsqueeze -> Cast(int32) -> Squeeze before they index a 2-row token-type
    table (the bound is behind that chain); the mask, cast to float, multiplies the summed embeddings;
    y = that times a 4x4 weight, [1,8,4]. Token-type ids of 2 or more make the CPU EP's Gather fail."""
    rng = np.random.default_rng(0)
    nodes = [
        h.make_node("Gather", ["word_table", "input_ids"], ["we"], name="word_emb"),
        h.make_node("Unsqueeze", ["token_type_ids", "ax0"], ["tt_u"], name="tt_unsqueeze"),
        h.make_node("Cast", ["tt_u"], ["tt_c"], name="tt_cast", to=TensorProto.INT32),
        h.make_node("Squeeze", ["tt_c", "ax0"], ["tt_s"], name="tt_squeeze"),
        h.make_node("Gather", ["type_table", "tt_s"], ["te"], name="type_emb"),
        h.make_node("Add", ["we", "te"], ["emb"], name="emb_add"),
        h.make_node("Cast", ["attention_mask"], ["m_f"], name="mask_cast", to=TensorProto.FLOAT),
        h.make_node("Unsqueeze", ["m_f", "ax2"], ["m_3"], name="mask_unsqueeze"),
        h.make_node("Mul", ["emb", "m_3"], ["masked"], name="mask_mul"),
        h.make_node("MatMul", ["masked", "w"], ["y"], name="proj"),
    ]
    initializers = [
        const("word_table", rng.standard_normal((50, 4))),
        const("type_table", rng.standard_normal((2, 4))),
        const("w", rng.standard_normal((4, 4))),
        const("ax0", [0], np.int64),
        const("ax2", [2], np.int64),
    ]
    inputs = [vi(name, [1, 8], INT64) for name in INPUTS]
    return make_model(nodes, inputs, [vi("y", [1, 8, 4])], initializers, name="embedding")
