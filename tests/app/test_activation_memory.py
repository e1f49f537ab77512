"""The tensors one inference makes, estimated from the model's shapes before anything is compiled: a run
whose input data and intermediate tensors would not fit in memory is refused with one line (exit 2)
instead of being ended by the kernel's OOM killer (`hetero benchmark -b 200000` on the default model).

The memory of this machine never decides a test: the limit and the memory available are injected.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import helper as h
from support.helpers import const, make_model, vi
from support.robust import invoke, nothing_left_behind, one_error_line

import hetero_cli as hc
from hetero_cli import cli
from hetero_cli.app import benchmark as bench
from hetero_cli.app import limits
from hetero_cli.graph import activation_peak

DIGITS = Path(__file__).resolve().parents[2] / "models" / "digits.onnx"
ROW = 256 * 4  # bytes of one row of the chain model's float32 [n,256] tensors


def _chain() -> hc.Model:
    """x[n,256] -> Relu -> a -> Relu -> b; y = Add(a, b); c = MatMul(y, w) (w a weight, not counted)."""
    nodes = [
        h.make_node("Relu", ["x"], ["a"], name="relu_a"),
        h.make_node("Relu", ["a"], ["b"], name="relu_b"),
        h.make_node("Add", ["a", "b"], ["y"], name="add"),
        h.make_node("MatMul", ["y", "w"], ["c"], name="matmul"),
    ]
    w = const("w", np.zeros((256, 256)))
    return hc.Model(make_model(nodes, [vi("x", ["n", 256])], [vi("c", ["n", 256])], [w]))


def _limit(monkeypatch: pytest.MonkeyPatch, limit: int, available: int | None = None) -> None:
    monkeypatch.setattr(limits, "memory_limit", lambda: limit)
    monkeypatch.setattr(limits, "available_memory", lambda: available)


@pytest.mark.parametrize("n", [1, 1000])
def test_the_peak_counts_the_tensors_alive_at_once(n):
    """x is freed once relu_a read it; a stays alive until add; at add a, b and y are alive (3 rows), at
    matmul b and a are freed: y and c (2 rows). The weight w is not an activation."""
    assert activation_peak(_chain(), {"x": (n, 256)}) == 3 * n * ROW


def test_the_peak_follows_the_shapes_asked_for_and_constants_are_left_out():
    model = hc.Core().read_model(DIGITS)
    one = activation_peak(model, {"image": (1, 1, 32, 32)})
    assert one > 32 * 32 * 4  # more than the input: the convolutions' outputs
    assert activation_peak(model, {"image": (64, 1, 32, 32)}) == 64 * one


def test_data_shapes_refuses_a_batch_whose_tensors_would_not_fit(monkeypatch):
    """-b 64 on the default model: 256 KiB of input data, fine alone, but some 4 MiB of tensors."""
    model = hc.Core().read_model(DIGITS)
    _limit(monkeypatch, 2**20)
    bench.data_shapes(model, batch=4)  # about 256 KiB of tensors
    with pytest.raises(bench.BenchmarkError) as err:
        bench.data_shapes(model, batch=64)
    text = str(err.value)
    assert "one inference at these shapes makes about 4.0 MiB of tensors alive at once" in text
    assert "over the limit of 1.0 MiB (half of this machine's memory)" in text
    assert text.endswith("give a smaller -b, -shape or -data_shape")


def test_memory_available_now_is_the_limit_where_it_is_less(monkeypatch):
    model = hc.Core().read_model(DIGITS)
    _limit(monkeypatch, 2**40, available=2**20)
    with pytest.raises(bench.BenchmarkError, match=r"over the 1\.0 MiB of memory available now"):
        bench.input_sets(model, {"image": (64, 1, 32, 32)}, {}, 1)


def test_a_fixed_input_says_to_use_a_model_with_smaller_inputs(monkeypatch):
    nodes = [h.make_node("Relu", ["x"], ["a"], name="r"), h.make_node("Neg", ["a"], ["y"], name="n")]
    model = hc.Model(make_model(nodes, [vi("x", [64, 1024])], [vi("y", [64, 1024])]))
    _limit(monkeypatch, 400 * 1024)  # the 256 KiB of input fit; with a and y they do not
    with pytest.raises(bench.BenchmarkError, match=r"use a model with smaller inputs$"):
        bench.data_shapes(model)


def test_benchmark_refuses_at_once_with_exit_2_and_one_line(tmp_path, monkeypatch):
    _limit(monkeypatch, 2**20)
    with nothing_left_behind(tmp_path):
        result = invoke(cli.benchmark, "-m", DIGITS, "-d", "HETERO:CPU", "-b", 64, "-niter", 1)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "tensors alive at once" in line and "give a smaller -b" in line
    assert "Step 7/11" not in result.stdout  # refused before anything is compiled


def test_available_memory_reads_meminfo_and_a_cgroups_headroom(tmp_path, monkeypatch):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       8000000 kB\nMemAvailable:    2048 kB\n")
    monkeypatch.setattr(limits, "_MEMINFO", str(meminfo))
    monkeypatch.setattr(limits, "_CGROUP_LIMITS", (str(tmp_path / "max"),))
    monkeypatch.setattr(limits, "_CGROUP_USAGE", (str(tmp_path / "current"),))
    assert limits.available_memory() == 2048 * 1024  # no cgroup files
    (tmp_path / "max").write_text("max\n")
    (tmp_path / "current").write_text("5000\n")
    assert limits.available_memory() == 2048 * 1024  # a cgroup without a limit
    (tmp_path / "max").write_text("6000\n")
    assert limits.available_memory() == 1000  # the container's headroom is less
    (tmp_path / "max").write_text(str(2**63 - 4096))
    assert limits.available_memory() == 2048 * 1024  # cgroup v1's "no limit"
