"""Models the command-line tests of validate and tune share, written to the test's folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper as h
from support.helpers import EXP_CHAIN, chain_model, const, make_model, vi


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    """x[4,64] -> Neg -> Abs -> Relu -> Exp -> Neg -> Abs -> Relu -> Neg -> y, nodes n0..n7."""
    path = tmp_path / "chain.onnx"
    onnx.save(chain_model(EXP_CHAIN, shape=(4, 64)), str(path))
    return path


@pytest.fixture
def dynamic(tmp_path: Path) -> Path:
    """x[n,16] -> MatMul -> Softmax -> y, n dynamic."""
    rng = np.random.default_rng(0)
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
        h.make_node("Softmax", ["a"], ["y"], name="sm", axis=-1),
    ]
    proto = make_model(
        nodes, [vi("x", ["n", 16])], [vi("y", ["n", 16])], [const("w", rng.standard_normal((16, 16)))]
    )
    path = tmp_path / "dynamic.onnx"
    onnx.save(proto, str(path))
    return path


@pytest.fixture
def token_model(tmp_path: Path) -> Path:
    """input_ids int64 [batch,sequence] -> Gather (an embedding of 10 x 8) -> e -> Relu -> y, nodes emb, act:
    a model whose input only data can size."""
    rng = np.random.default_rng(0)
    nodes = [
        h.make_node("Gather", ["table", "input_ids"], ["e"], name="emb"),
        h.make_node("Relu", ["e"], ["y"], name="act"),
    ]
    proto = make_model(
        nodes,
        [vi("input_ids", ["batch", "sequence"], onnx.TensorProto.INT64)],
        [vi("y", ["batch", "sequence", 8])],
        [const("table", rng.standard_normal((10, 8)))],
    )
    path = tmp_path / "tokens.onnx"
    onnx.save(proto, str(path))
    return path


def _nonfinite_model(path: Path, outputs: tuple[str, ...]) -> Path:
    """x[2,3] -> Mul by a 0/1 mask (n0) -> y; Log(y) (n1) -> logp, -inf where the mask is 0; Div(y, y) (n2)
    -> ratio, NaN there: outputs that hold the same infinities and NaNs, whatever device runs what."""
    nodes = [
        h.make_node("Mul", ["x", "mask"], ["y"], name="n0"),
        h.make_node("Log", ["y"], ["logp"], name="n1"),
        h.make_node("Div", ["y", "y"], ["ratio"], name="n2"),
    ]
    proto = make_model(
        [n for n in nodes if n.output[0] in ("y", *outputs)],
        [vi("x", [2, 3])],
        [vi(name, [2, 3]) for name in outputs],
        [const("mask", [[0, 1, 1], [1, 0, 1]])],
    )
    onnx.save(proto, str(path))
    return path


@pytest.fixture
def infinities(tmp_path: Path) -> Path:
    """The nonfinite model with its output logp alone: -inf in 2 of its 6 elements, on any device."""
    return _nonfinite_model(tmp_path / "infinities.onnx", ("logp",))


@pytest.fixture
def nonfinite(tmp_path: Path) -> Path:
    """The nonfinite model: logp (-inf in 2 elements) and ratio (NaN in the same 2), on any device."""
    return _nonfinite_model(tmp_path / "nonfinite.onnx", ("logp", "ratio"))
