"""``tune_model`` on a real dynamically quantized model: ddddocr's older captcha recogniser (ConvInteger,
DynamicQuantizeLSTM, MatMulInteger; tests/support/pypi_models.py). Its outputs depend on the CPU EP's
thread count, so the tune's reference (the whole model on CPU) must run with the candidates' own config:
against a reference with the default threads, the CPU candidate itself failed validation (1.12 on 2 of
262720 elements). The timer answers from a table (nothing is timed), so the run is short and its choice
fixed: CPU, the fastest by the table."""

from __future__ import annotations

import numpy as np
from support.helpers import needs_openvino
from support.pypi_models import fetch

import hetero_cli as hc
from hetero_cli.app.tune import tune_model

ONE_THREAD = {"CPU": {"INFERENCE_NUM_THREADS": 1}, "OPENVINO": {"INFERENCE_NUM_THREADS": 1}}
SHAPE = (1, 1, 64, 256)


def fixed_timer(label, run, count):
    """CPU's candidate takes 1 ms, everything else 5 ms: the search's choices follow this alone."""
    return [1.0 if label in ("candidate:CPU", "probe:CPU") else 5.0] * count


@needs_openvino
def test_the_reference_runs_with_the_tunes_config_so_a_quantized_models_cpu_candidate_passes():
    core = hc.Core()
    path = fetch("ddddocr_common_old")
    feeds = {"input1": np.random.default_rng(0).random(SHAPE, dtype=np.float32)}
    model = core.read_model(path)
    one = core.compile_model(model, "CPU", ONE_THREAD)(feeds)
    two = core.compile_model(model, "CPU", {"CPU": {"INFERENCE_NUM_THREADS": 2}})(feeds)
    name = model.outputs[0].get_any_name()
    # what the test rests on: the thread count moves this model's outputs
    assert not np.array_equal(one[name], two[name])
    result = tune_model(
        core,
        path,
        "HETERO:OPENVINO,CPU",
        config=ONE_THREAD,
        inputs=[feeds],
        budget_s=30.0,
        timer=fixed_timer,
    )
    report = result.report
    assert report.winner == "CPU"
    assert report.validation["candidate"] == "CPU" and report.validation["passed"] is True
    assert all(o["max_abs"] == 0.0 for o in report.validation["outputs"])
    assert not [n for n in report.notes if "failed validation" in n and n.startswith("CPU ")]
