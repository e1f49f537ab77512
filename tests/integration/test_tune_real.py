"""``tune_model`` on real models (tests/support/pypi_models.py), its timer answering from a table (nothing
is timed), so each run is short and its choice fixed.

- ddddocr's older captcha recogniser, dynamically quantized (ConvInteger, DynamicQuantizeLSTM,
  MatMulInteger): on some CPUs (an Intel one, not an AMD EPYC) its outputs depend on the CPU EP's thread
  count, so the tune's reference (the whole model on CPU) must run with the candidates' own config:
  against a reference with the default threads, the CPU candidate itself failed validation there (1.12
  on 2 of 262720 elements). The table makes CPU fastest, and its candidate must match the reference
  exactly on any CPU; tests/app/test_tune.py checks the reference's config itself, which holds
  whatever this CPU does with the thread count.
- Robust Video Matting (MobileNetV3, ConvGRU decoder, deep guided filter): the table makes the decoder's
  tail fastest on OPENVINO and the rest on CPU, so a split wins; it must give the whole model's outputs,
  and the model saved with its affinities must run as is (manual mode). ``make bench`` times the real
  thing, each runtime in its own processes (docs/performance.md says what that run found)."""

from __future__ import annotations

import numpy as np
from support.helpers import WorkClock, needs_openvino
from support.pypi_models import RVM_DOWNSAMPLE_RATIO, RVM_FRAME, fetch

import hetero_cli as hc
from hetero_cli.app.tune import tune_model

ONE_THREAD = {"CPU": {"INFERENCE_NUM_THREADS": 1}, "OPENVINO": {"INFERENCE_NUM_THREADS": 1}}
SHAPE = (1, 1, 64, 256)


def _tune(core, path, feeds, budget_s, timer):
    """tune_model on HETERO:OPENVINO,CPU with one thread per device, ``timer`` answering, and the budget
    kept in seconds of work done (WorkClock: 0.1 s a session), not of this machine's speed."""
    clock = WorkClock(session_s=0.1)
    with clock.counting_sessions():
        return tune_model(
            core,
            path,
            "HETERO:OPENVINO,CPU",
            config=ONE_THREAD,
            inputs=[feeds],
            budget_s=budget_s,
            timer=clock.timing(timer),
            now=clock,
        )


def fixed_timer(label, run, count):
    """CPU's candidate takes 1 ms, everything else 5 ms: the search's choices follow this alone."""
    return [1.0 if label in ("candidate:CPU", "probe:CPU") else 5.0] * count


@needs_openvino
def test_the_reference_runs_with_the_tunes_config_so_a_quantized_models_cpu_candidate_passes():
    core = hc.Core()
    path = fetch("ddddocr_common_old")
    feeds = {"input1": np.random.default_rng(0).random(SHAPE, dtype=np.float32)}
    result = _tune(core, path, feeds, 30.0, fixed_timer)
    report = result.report
    assert report.winner == "CPU"
    assert report.validation.candidate == "CPU" and report.validation.passed is True
    assert all(o.max_abs == 0.0 for o in report.validation.outputs)
    assert not [n for n in report.notes if "failed validation" in n and n.startswith("CPU ")]


def split_timer(label, run, count):
    """Regions 11-13 (the decoder's tail) take 1 ms on OPENVINO and 3 on CPU, the others the reverse; a
    boundary costs next to nothing; every cost-model candidate measures 1 ms end to end, the rest 5."""
    if label.startswith("region:"):
        _, index, device = label.split(":")
        fast = "OPENVINO" if 11 <= int(index) <= 13 else "CPU"
        return [1.0 if device == fast else 3.0] * count
    if label.startswith("boundary:"):
        return [0.01] * count
    return [1.0 if label.startswith("candidate:cost-model") else 5.0] * count


@needs_openvino
def test_a_split_of_robust_video_matting_wins_validates_and_runs_from_its_saved_file(tmp_path):
    core = hc.Core()
    rng = np.random.default_rng(0)
    feeds = {name: rng.random(shape, dtype=np.float32) for name, shape in RVM_FRAME.items()}
    feeds["downsample_ratio"] = np.array([RVM_DOWNSAMPLE_RATIO], np.float32)
    result = _tune(core, fetch("rvm_mobilenetv3"), feeds, 60.0, split_timer)
    report = result.report
    winner = report.candidate(report.winner)
    assert winner.kind == "cost-model" and set(winner.devices) == {"CPU", "OPENVINO"}, winner
    assert report.validation.passed is True
    saved = tmp_path / "rvm_tuned.onnx"
    result.model.save(str(saved))
    split = core.compile_model(str(saved), "HETERO:OPENVINO,CPU", ONE_THREAD)
    assert [s.device for s in split.subgraphs] == winner.devices
    got = split(feeds)
    want = core.compile_model(str(fetch("rvm_mobilenetv3")), "CPU", ONE_THREAD)(feeds)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-3, atol=1e-4, err_msg=name)
