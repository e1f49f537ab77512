"""``hetero benchmark`` takes benchmark_app's command line: every option accepted with its meaning or refused in
one line (exit 2), never one option read as another's value; dynamic inputs refused without data shapes;
benchmark_app's hint and API defaults; ``--json``. Run as a user runs it, in a subprocess; compared with
OpenVINO's own benchmark_app where that is installed (the bench extra)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.helpers import needs_openvino
from support.robust import on_a_terminal

from hetero_cli.cli.bapp_args import HINTS, REFUSED, REFUSED_LONG

ROOT = Path(__file__).resolve().parents[2]
DIGITS = str(ROOT / "models" / "digits.onnx")
IMAGES = ROOT / "samples" / "images"
RUN = [DIGITS, "-b", "1", "-niter", "2"]


def hetero(*args: object, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``hetero ARGS`` as a user runs it, from this source tree."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENVINO_HETERO_VISUALIZE", "HETERO_DEBUG")}
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run(
        [sys.executable, "-c", "from hetero_cli.cli import hetero; hetero()", *map(str, args)],
        cwd=cwd, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    return result


def bench(*args: object, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return hetero("benchmark", "-m", *args, cwd=cwd)


def one_error(result: subprocess.CompletedProcess[str]) -> str:
    """The one ``[ ERROR ]`` line of a refused command line (exit status 2, nothing else on stderr)."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("[ ERROR ] "), result.stderr
    return lines[0]


def count(stdout: str) -> int:
    return int(re.search(r"\[ INFO \] Count:\s+(\d+) iterations", stdout)[1])


# --- refused and unknown options -------------------------------------------------------------------------

REFUSALS = [
    (["-pin", "YES"], "-pin is not supported", "taskset"),
    (["--infer_threads_pinning", "NO"], "-pin is not supported", "numactl"),
    (["-lfile"], "-lfile is not supported", "-m"),
    (["--load_from_file", "x.blob"], "-lfile is not supported", "leave it out"),
    (["-extensions", "ops.so"], "-extensions is not supported", "standard ONNX operators"),
    (["-c", "kernels.xml"], "-c is not supported", "leave it out"),
    (["-inference_only", "false"], "-inference_only", "fills the inputs once"),
]


@pytest.mark.parametrize(("args", "what", "instead"), REFUSALS, ids=[" ".join(r[0]) for r in REFUSALS])
def test_a_refused_option_is_one_line_saying_what_to_do_instead(args, what, instead):
    line = one_error(bench(*RUN, *args))
    assert what in line and instead in line


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["-max_irat", "3"], "No such option '-max_irat' (did you mean -max_irate?)"),
        (["-inference_onl"], "No such option '-inference_onl' (did you mean -inference_only?)"),
        (["-nthread", "2"], "No such option '-nthread' (did you mean -nthreads?)"),
        (["-ipp", "u8"], "No such option '-ipp'"),
        (["-dmodels"], "No such option '-dmodels' (did you mean -d models?)"),
        (["-pc", "maybe"], "-pc takes true or false (or nothing), not 'maybe'"),
        (["-hint", "fast"], "'fast' is not a hint"),
        (["-latency_percentile", "0"], "-latency_percentile"),
    ],
)
def test_an_unknown_option_is_named_whole_never_read_as_a_short_option_and_its_value(args, text):
    """click alone reads -max_irat as -m ax_irat ("model file not found: ax_irat")."""
    line = one_error(bench(*RUN, *args))
    assert text in line
    assert "not found" not in line


def test_max_irate_is_its_own_option_and_limits_the_rate():
    """-max_irate 100 before -m is no -m; at 20 frames per second one second holds about 20 inferences."""
    free = hetero("benchmark", "-max_irate", "100", "-m", *RUN)
    assert free.returncode == 0, free.stderr
    assert "-max_irate: at most 100 frames start per second" in free.stdout
    limited = bench(DIGITS, "-b", "1", "-t", "1", "-api", "sync", "-max_irate", "20")
    assert limited.returncode == 0, limited.stderr
    assert 1 <= count(limited.stdout) <= 25  # unlimited, digits.onnx makes thousands a second


@pytest.mark.parametrize(
    "args",
    [
        ["-ip", "u8"],
        ["-iop", "image:u8"],
        ["-op", "f32"],
        ["-infer_precision", "f32"],
        ["-inference_only"],
        ["-inference_only", "true"],
        ["-pcseq"],
        ["-layout", "[NCHW]"],
        ["-nthreads", "1"],
        ["-no_warmup"],
        ["-latency_percentile", "90"],
        ["-max_irate=1000"],
    ],
)
def test_options_that_take_a_word_starting_like_i_or_m_are_their_own(args):
    """-inference_only, -infer_precision, -ip and -iop are not -i; -max_irate is not -m."""
    result = bench(*RUN, *args)
    assert result.returncode == 0, result.stderr
    assert "[ INFO ] Count:" in result.stdout


# --- what the accepted options do ----------------------------------------------------------------------


def test_long_forms_true_false_values_and_percentile(tmp_path):
    result = hetero(
        "benchmark", "--path_to_model", DIGITS, "--target_device", "CPU", "--batch_size", "1",
        "--number_iterations", "3", "--api_type", "sync", "--perf_hint", "LATENCY", "--perf_counts", "true",
        "--report_type", "no_counters", "--report_folder", tmp_path, "--json_stats", "TRUE",
        "--latency_percentile", "90",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "[ INFO ]    90 percentile:" in result.stdout
    assert "Performance counts for 0-th infer request" in result.stdout
    doc = json.loads((tmp_path / "benchmark_report.json").read_text())
    assert doc["execution_results"]["total number of iterations"] == "3"  # text, as benchmark_app writes it
    assert "latency (90 percentile) (ms)" in doc["execution_results"]
    off = bench(*RUN, "-pc", "false", "-api", "sync")
    assert off.returncode == 0, off.stderr
    assert "Performance counts" not in off.stdout and "second time" not in off.stdout


def test_perf_counts_say_a_second_compile_collects_them():
    result = bench(*RUN, "-pc", "-api", "sync")
    assert result.returncode == 0, result.stderr
    assert "Compiling the model a second time, with PERF_COUNT=YES, to collect the performance counters" in (
        result.stdout
    )


@pytest.mark.parametrize(
    ("hint", "shown", "api"),
    [
        ("tput", "THROUGHPUT", "asynchronously"),
        ("THROUGHPUT", "THROUGHPUT", "asynchronously"),
        ("ctput", "CUMULATIVE_THROUGHPUT", "asynchronously"),
        ("cumulative_throughput", "CUMULATIVE_THROUGHPUT", "asynchronously"),
        ("Latency", "LATENCY", "synchronously"),
    ],
)
def test_hint_aliases_any_case_and_latency_means_sync(hint, shown, api):
    result = bench(*RUN, "-hint", hint)
    assert result.returncode == 0, result.stderr
    assert f"[ INFO ] Hint: PERFORMANCE_HINT={shown}: -hint " in result.stdout
    assert f"PERFORMANCE_HINT: {shown}" in result.stdout
    assert f"(Start inference {api}" in result.stdout


def test_default_hint_is_stated_at_step_3_throughput_on_one_device_latency_on_hetero():
    one = bench(*RUN, "-d", "CPU")
    assert one.returncode == 0, one.stderr
    step3 = one.stdout.split("[Step 3/11]")[1].split("[Step 4/11]")[0]
    assert "Device(CPU) performance hint will be set to THROUGHPUT." in step3
    assert "benchmark_app's default for -api async on one device" in step3
    assert "-hint throughput" not in step3
    hetero_run = bench(*RUN, "-d", "HETERO:CPU")
    assert hetero_run.returncode == 0, hetero_run.stderr
    step3 = hetero_run.stdout.split("[Step 3/11]")[1].split("[Step 4/11]")[0]
    assert "Device(HETERO) performance hint will be set to LATENCY." in step3
    assert "as OpenVINO's HETERO" in step3 and "-hint" not in step3.replace("no -hint", "")
    # OpenVINO's HETERO: -api async, OPTIMAL_NUMBER_OF_INFER_REQUESTS requests (1 for one device)
    assert "OPTIMAL_NUMBER_OF_INFER_REQUESTS: 1" in hetero_run.stdout
    assert "(Start inference asynchronously, 1 inference requests" in hetero_run.stdout


def test_nthreads_and_openvino_num_streams_reach_the_devices(tmp_path):
    result = bench(*RUN, "-nthreads", "1", "-dump_config", tmp_path / "c.json")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "c.json").read_text())["CPU"]["INFERENCE_NUM_THREADS"] == 1
    line = one_error(bench(*RUN, "-nstreams", "2"))
    assert "OpenVINO EP's num_streams" in line and "-nireq" in line
    line = one_error(bench(*RUN, "-d", "HETERO:CPU", "-nstreams", "CPU:2"))
    assert "-nstreams CPU" in line


@needs_openvino
def test_nstreams_and_openvino_spelling_of_num_streams(tmp_path):
    for args in (["-nstreams", "2"], ["--config", "OPENVINO:NUM_STREAMS=2"]):
        result = bench(*RUN, "-d", "HETERO:OPENVINO,CPU", *args, "-dump_config", tmp_path / "c.json")
        assert result.returncode == 0, (args, result.stderr)
        assert json.loads((tmp_path / "c.json").read_text())["OPENVINO"]["num_streams"] == "2"


def test_input_and_output_precisions():
    made = bench(*RUN, "-ip", "u8")
    assert "image: data [1,1,32,32] from seeded random values made as uint8" in made.stdout
    line = one_error(bench(*RUN, "-op", "u8"))
    assert "output 'probabilities' is float32" in line and "ONNX Runtime returns" in line
    line = one_error(bench(*RUN, "-iop", "nothing:u8"))
    assert "-iop names 'nothing'" in line


def test_mean_and_scale_values_apply_to_images_only():
    result = bench(
        *RUN,
        "-i",
        IMAGES / "digit_3.png",
        "--mean_values",
        "[10]",
        "--scale_values",
        "image[2]",
        "-api",
        "sync",
    )
    assert result.returncode == 0, result.stderr
    line = one_error(bench(*RUN, "--mean_values", "[10]"))
    assert "applies it to the images -i gives" in line


# --- dynamic dimensions --------------------------------------------------------------------------------


def test_a_dynamic_input_needs_its_data_shape_as_in_benchmark_app(tmp_path):
    line = one_error(bench(DIGITS, "-niter", "2"))
    assert "Input 'image' is dynamic ([batch,1,32,32]). Provide data shapes!" in line
    assert "-data_shape image[1,1,32,32]" in line and "--fill-dynamic" in line
    filled = bench(DIGITS, "-niter", "2", "--fill-dynamic")
    assert filled.returncode == 0, filled.stderr
    assert "dynamic dimensions set to 1" in filled.stdout
    batched = bench(DIGITS, "-niter", "2", "-b", "4")
    assert "Model batch size: 4" in batched.stdout
    np.save(tmp_path / "x.npy", np.zeros((3, 1, 32, 32), np.float32))
    from_file = bench(DIGITS, "-niter", "2", "-i", tmp_path / "x.npy")
    assert from_file.returncode == 0, from_file.stderr
    assert "Model batch size: 3" in from_file.stdout
    images = bench(DIGITS, "-niter", "2", "-i", IMAGES / "digit_1.bmp", IMAGES / "digit_2.jpg")
    assert images.returncode == 0, images.stderr
    assert "image: data [1,1,32,32] from 2 file(s)" in images.stdout


def test_niter_0_compiles_and_stops_without_data_shapes():
    result = bench(DIGITS, "-niter", "0")
    assert result.returncode == 0, result.stderr
    assert "-niter 0: compiled; no inference was run" in result.stdout
    assert "[Step 9/11]" not in result.stdout
    doc = json.loads(bench(DIGITS, "-niter", "0", "--json").stdout)
    assert doc["count"] == 0 and doc["subgraphs"][0]["device"] == "CPU" and doc["compile_model_ms"] > 0


# --- for scripts ----------------------------------------------------------------------------------------


def test_json_summary_alone_on_stdout():
    result = bench(*RUN, "-hint", "latency", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["count"] == 2 and doc["api"] == "sync" and doc["nireq"] == 1 and doc["hint"] == "LATENCY"
    assert doc["device"] == "CPU" and doc["subgraphs"][0]["device"] == "CPU"
    assert set(doc["latency_ms"]) == {"median", "average", "min", "max", "percentile"}
    assert doc["throughput_fps"] > 0 and doc["duration_ms"] > 0
    assert "[Step 11/11]" in result.stderr


def test_files_no_request_reads_are_counted_apart_and_warned_of(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((1, 1, 32, 32), np.float32))
    np.save(tmp_path / "b.npy", np.zeros((1, 1, 32, 32), np.float32))
    one = bench(DIGITS, "-niter", "2", "-api", "async", "-nireq", "1", "-i", tmp_path)
    assert one.returncode == 0, one.stderr
    assert "image: data [1,1,32,32] from 1 of 2 file(s)" in one.stdout
    assert "-i gives 'image' 2 file(s) and 1 infer request(s) read the first 1" in one.stderr
    two = bench(DIGITS, "-niter", "2", "-api", "async", "-nireq", "2", "-i", tmp_path)
    assert "from 2 file(s)" in two.stdout and "read the first" not in two.stderr


def test_niter_0_writes_the_report_of_what_ran_the_compile(tmp_path):
    result = bench(
        DIGITS, "-niter", "0", "-report_type", "detailed_counters", "-report_folder", tmp_path / "r"
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["benchmark_report.csv"]
    text = (tmp_path / "r" / "benchmark_report.csv").read_text()
    assert "number of iterations;0" in text and "compile model time (ms);" in text
    assert "writes no counters" in result.stdout


def test_exec_graph_path_writes_the_plan_with_its_links(tmp_path):
    result = bench(*RUN, "-d", "HETERO:CPU", "-exec_graph_path", tmp_path / "plan.json")
    assert result.returncode == 0, result.stderr
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert [(s["device"], s["ep"]) for s in doc["subgraphs"]] == [("CPU", "CPUExecutionProvider")]
    assert doc["links"][0]["tensor"] == "image" and doc["links"][0]["from_subgraph"] is None


# --- against OpenVINO's benchmark_app --------------------------------------------------------------------


def _benchmark_app_parser():
    params = pytest.importorskip(
        "openvino.tools.benchmark.parameters",
        reason="OpenVINO's benchmark_app (the bench extra) is not installed",
    )
    return params.parse_args()


def test_every_benchmark_app_option_is_accepted_or_refused_with_a_reason():
    parser = _benchmark_app_parser()
    theirs = {s for action in parser._actions for s in action.option_strings}
    from hetero_cli.cli import benchmark

    ours = {name for p in benchmark.params for name in getattr(p, "opts", ())} | {"-h", "--help"}
    refused = set(REFUSED) | set(REFUSED_LONG)
    assert theirs - ours - refused == set()
    hints = next(a.choices for a in parser._actions if "-hint" in a.option_strings)
    assert set(hints) <= set(HINTS)


def test_step_titles_and_loop_header_match_benchmark_app(tmp_path):
    _benchmark_app_parser()
    app = shutil.which("benchmark_app", path=str(Path(sys.executable).parent))
    if app is None:
        pytest.skip("OpenVINO's benchmark_app script is not installed beside this Python")
    args = ["-m", DIGITS, "-d", "CPU", "-shape", "[1,1,32,32]", "-niter", "3"]
    for extra in (["-hint", "latency"], ["-hint", "throughput", "-nireq", "2", "-niter", "4"]):
        theirs = subprocess.run(
            [app, *args, *extra], capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
        assert theirs.returncode == 0, theirs.stdout[-2000:]
        ours = hetero("benchmark", *args, *extra, cwd=tmp_path)
        assert ours.returncode == 0, ours.stderr

        def steps(text: str) -> list[str]:
            return [
                line
                for line in text.splitlines()
                if line.startswith("[Step ") and not line.startswith("[Step 2/11]")
            ]

        assert steps(ours.stdout) == steps(theirs.stdout)
    dynamic = subprocess.run([app, "-m", DIGITS, "-niter", "1"], capture_output=True, text=True, timeout=120)
    assert "Input image is dynamic. Provide data shapes!" in dynamic.stdout + dynamic.stderr
    assert "is dynamic ([batch,1,32,32]). Provide data shapes!" in one_error(bench(DIGITS, "-niter", "1"))


def test_a_terminal_sees_a_spinner_while_the_model_compiles_and_again_for_the_counters():
    """On a terminal (a pseudo-terminal here) the compiles show a spinner on stderr, which clears after."""
    text = on_a_terminal("benchmark", "-m", *RUN, "-pc")
    assert "Compiling the model (and querying the devices for the automatic placement)" in text
    assert "Compiling the model with the profiler on" in text
    assert "[ INFO ] Count:" in text
