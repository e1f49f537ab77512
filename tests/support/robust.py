"""Builders and checks shared by the robustness tests (issue 5): nothing-left-behind, external data,
QDQ, control flow and dynamic-shape models. Every model here is small and built at test time.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import onnx
from click.testing import CliRunner
from onnx import TensorProto
from onnx import helper as h

import hetero_cli as hc
from hetero_cli.errors import HeteroError
from support.helpers import const, make_model, vi

FLOAT = TensorProto.FLOAT


def _listing(folder: Path) -> set[str]:
    try:
        return {str(p.relative_to(folder)) for p in folder.rglob("*")}
    except FileNotFoundError:
        return set()


@contextlib.contextmanager
def nothing_left_behind(*folders: Path) -> Iterator[None]:
    """Fail if the block leaves a new entry in the temporary folder or the current directory (their top
    level), or anywhere in ``folders``. Both are the test's own (tests/conftest.py's own_places): another
    process writing to a shared one at the same time would fail the test."""
    tops = [Path(tempfile.gettempdir()), Path.cwd()]
    before_tops = [set(os.listdir(t)) for t in tops]
    before = {f: _listing(f) for f in folders}
    yield
    for top, old in zip(tops, before_tops, strict=True):
        new_top = sorted(set(os.listdir(top)) - old)
        assert not new_top, f"left in {top}: {new_top}"
    for f in folders:
        new = sorted(_listing(f) - before[f])
        assert not new, f"left in {f}: {new}"


def one_error_line(result) -> str:
    """The one ``[ ERROR ]`` line of a failed CLI run, checking there is no traceback and nothing else."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in result.stderr, result.stderr
    assert "internal error" not in result.stderr, result.stderr
    errors = [line for line in lines if line.startswith("[ ERROR ] ")]
    assert len(errors) == 1, result.stderr
    assert all(line.startswith(("[ ERROR ] ", "[ WARNING ] ")) for line in lines), result.stderr
    return errors[0]


def invoke(command, *args):
    """Run a click command in-process with string arguments (click's CliRunner)."""
    return CliRunner().invoke(command, [str(a) for a in args])


def only_hetero_errors(call, *args, **kwargs):
    """Call; a HeteroError is fine (returned), any other exception fails the test with its type."""
    try:
        return call(*args, **kwargs)
    except HeteroError as exc:
        return exc
    except Exception as exc:  # pragma: no cover - this is what the tests look for
        raise AssertionError(f"{type(exc).__name__} (not a HeteroError) from {call.__name__}: {exc}") from exc


# --- external data ---------------------------------------------------------------------------------------


def external_model(folder: Path, *, name: str = "m.onnx", location: str = "m.data") -> Path:
    """x[1,16] -> MatMul(w[16,128]) -> Add(b) -> Relu -> y[1,128], both weights in ``folder/location``.

    w (8 KiB) is bigger than what read_model reads in, b (512 bytes) smaller.
    """
    rng = np.random.default_rng(0)
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["mm"], name="matmul"),
        h.make_node("Add", ["mm", "b"], ["biased"], name="add"),
        h.make_node("Relu", ["biased"], ["y"], name="relu"),
    ]
    inits = [
        const("w", rng.standard_normal((16, 128))),
        const("b", rng.standard_normal((128,))),
    ]
    proto = make_model(nodes, [vi("x", [1, 16])], [vi("y", [1, 128])], inits, name="external")
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(
        proto,
        str(folder / name),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=location,
        size_threshold=0,
    )
    return folder / name


def set_location(path: Path, tensor: str, location: str) -> None:
    """Rewrite one external tensor's location in the .onnx file (its data stays where it is)."""
    proto = onnx.load(str(path), load_external_data=False)
    for t in proto.graph.initializer:
        if t.name == tensor:
            for entry in t.external_data:
                if entry.key == "location":
                    entry.value = location
    onnx.save(proto, str(path))


# --- quantized and mixed precision -----------------------------------------------------------------------


def qdq_model(op: str, act: int = TensorProto.INT8) -> onnx.ModelProto:
    """x(float) -> Q -> DQ -> op (with DQ(weight) where it has one) -> Q -> DQ -> Relu -> y.

    ``op`` is Conv, MatMul or Add; the activations are ``act`` (INT8 or UINT8), the weight int8.
    """
    rng = np.random.default_rng(1)
    np_act = np.int8 if act == TensorProto.INT8 else np.uint8
    zero = 0 if act == TensorProto.INT8 else 128
    if op == "Conv":
        x_shape, w_shape, y_shape = [1, 2, 6, 6], [3, 2, 3, 3], [1, 3, 4, 4]
    elif op == "MatMul":
        x_shape, w_shape, y_shape = [2, 8], [8, 4], [2, 4]
    else:
        x_shape, w_shape, y_shape = [2, 8], [2, 8], [2, 8]
    inits = [
        const("x_scale", 0.05),
        onnx.numpy_helper.from_array(np.array(zero, np_act), "x_zero"),
        const("w_scale", 0.02),
        onnx.numpy_helper.from_array(np.array(0, np.int8), "w_zero"),
        onnx.numpy_helper.from_array(rng.integers(-60, 60, w_shape).astype(np.int8), "w_q"),
        const("y_scale", 0.1),
        onnx.numpy_helper.from_array(np.array(zero, np_act), "y_zero"),
    ]
    nodes = [
        h.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["x_q"], name="q_in"),
        h.make_node("DequantizeLinear", ["x_q", "x_scale", "x_zero"], ["x_dq"], name="dq_in"),
        h.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zero"], ["w_dq"], name="dq_w"),
        h.make_node(op, ["x_dq", "w_dq"], ["op_out"], name="op"),
        h.make_node("QuantizeLinear", ["op_out", "y_scale", "y_zero"], ["y_q"], name="q_out"),
        h.make_node("DequantizeLinear", ["y_q", "y_scale", "y_zero"], ["y_dq"], name="dq_out"),
        h.make_node("Relu", ["y_dq"], ["y"], name="relu"),
    ]
    return make_model(nodes, [vi("x", x_shape)], [vi("y", y_shape)], inits, name=f"qdq_{op.lower()}")


def fp16_model() -> onnx.ModelProto:
    """x(float) -> Cast f16 -> MatMul(w f16) -> Add(b f16) -> Tanh -> Cast float -> Mul(x) -> y."""
    rng = np.random.default_rng(2)
    nodes = [
        h.make_node("Cast", ["x"], ["x16"], name="to_half", to=TensorProto.FLOAT16),
        h.make_node("MatMul", ["x16", "w"], ["mm"], name="matmul"),
        h.make_node("Add", ["mm", "b"], ["biased"], name="add"),
        h.make_node("Tanh", ["biased"], ["t"], name="tanh"),
        h.make_node("Cast", ["t"], ["t32"], name="to_float", to=FLOAT),
        h.make_node("Mul", ["t32", "x"], ["y"], name="mul"),
    ]
    inits = [
        const("w", rng.standard_normal((8, 8)) * 0.3, np.float16),
        const("b", rng.standard_normal((8,)) * 0.1, np.float16),
    ]
    return make_model(nodes, [vi("x", [4, 8])], [vi("y", [4, 8])], inits, name="fp16")


# --- names -----------------------------------------------------------------------------------------------


def node_names(model: hc.Model) -> list[str]:
    return [n.get_friendly_name() for n in model.get_ops()]


def feeds_for(model: hc.Model, shapes: dict[str, Sequence[int]] | None = None, seed: int = 0):
    """Seeded inputs for every model input (dynamic dimensions from ``shapes``, else 2)."""
    rng = np.random.default_rng(seed)
    out = {}
    for info in model.inputs:
        shape = (shapes or {}).get(info.name) or [
            d if isinstance(d, int) and d > 0 else 2 for d in info.shape
        ]
        out[info.name] = rng.standard_normal(shape).astype(info.dtype)
    return out


def on_a_terminal(*args: str) -> str:
    """``hetero args`` (``python -m hetero_cli``) run on a pseudo-terminal, stdout and stderr both, as a
    user at a terminal sees it (spinners and bars draw only there); asserts it exits 0, returns the text."""
    import pty

    root = Path(__file__).resolve().parents[2]
    main, child = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "160"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hetero_cli", *args], cwd=root, stdout=child, stderr=child, env=env
    )
    os.close(child)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(timeout=120) == 0, out.decode(errors="replace")
    os.close(main)
    return out.decode(errors="replace")
