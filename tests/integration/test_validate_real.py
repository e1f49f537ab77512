"""``hetero validate`` on real OCR models: PaddleOCR's PP-OCRv4 text detector (DBNet, 672 nodes) and text
recogniser (SVTR, 860 nodes) and the PP-OCR text-direction classifier (566 nodes), as the
rapidocr-onnxruntime wheel ships them (tests/support/pypi_models.py), split in two halves of their nodes in
topological order: OPENVINO then CPU, and CPU then OPENVINO.

Tolerances (OpenVINO's float32 arithmetic against the CPU EP's, measured 2026-11-25 with
onnxruntime-openvino on this repository's CI machine, seeds 0 to 3, both orders):
- detector, 1x3x96x96 of hetero validate's random data (0..255), sigmoid map in 0..1: max abs error 9.1e-5,
  relative errors unbounded where the map is ~0. Checked at atol 5e-4 (five times that), rtol 1e-3.
- recogniser, 1x3x48x96 normalised as PaddleOCR does ((x / 255 - 0.5) / 0.5, so uniform in -1..1; data of
  0..255 saturates its softmax): max abs error 3.0e-6, max rel error 3.1e-5. Checked at atol 2e-5, rtol 1e-4.
- classifier, 1x3x48x192 of random data: max abs error 1.8e-7: the default tolerances (1e-5).
At zero tolerance each split fails, and the subgraph named is the OpenVINO half: subgraph1 when it comes
first, subgraph2 after the CPU half (whose values match the reference exactly).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.helpers import needs_openvino
from support.pypi_models import fetch
from support.robust import invoke

import hetero_cli as hc
from hetero_cli.app.validate import Tolerances, polygraphy_json, validate_model
from hetero_cli.cli import hetero

ORDERS = [("OPENVINO", "CPU"), ("CPU", "OPENVINO")]
# name: (input shape, --atol, --rtol, normalised input)
CASES = {
    "ppocr_det": ((1, 3, 96, 96), "5e-4", "1e-3", False),
    "ppocr_rec": ((1, 3, 48, 96), "2e-5", "1e-4", True),
    "ppocr_cls": ((1, 3, 48, 192), "1e-5", "1e-5", False),
}


def halves(model: hc.Model, first: str, second: str) -> dict[str, str]:
    """The first half of the nodes (topological order) on ``first``, the rest on ``second``."""
    ops = [n.get_friendly_name() for n in model.get_ops()]
    return {n: first if k < len(ops) // 2 else second for k, n in enumerate(ops)}


def inputs_of(name: str, seed: int = 0) -> list[dict[str, np.ndarray]] | None:
    """The recogniser's input normalised as PaddleOCR feeds it; None (random data) for the others."""
    shape, _, _, normalised = CASES[name]
    if not normalised:
        return None
    return [{"x": np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)}]


@needs_openvino
@pytest.mark.parametrize("order", ORDERS, ids=lambda o: "-then-".join(o))
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_split_in_halves_passes_and_fails_at_zero_tolerance(name, order):
    shape, atol, rtol, _ = CASES[name]
    core = hc.Core()
    model = core.read_model(fetch(name))
    model.set_affinities(halves(model, *order))
    given = {"inputs": inputs_of(name)} if inputs_of(name) else {"shapes": {"x": shape}}
    report = validate_model(
        core, model, "HETERO:OPENVINO,CPU", tolerances=Tolerances.parse([atol], [rtol]), **given
    )
    assert report.passed, report.iterations
    [[output]] = report.iterations
    assert output.max_abs is not None and 0 < output.max_abs < float(atol) / 2

    strict = validate_model(
        core, model, "HETERO:OPENVINO,CPU", tolerances=Tolerances.parse(["0"], ["0"]), **given
    )
    assert not strict.passed
    loc = strict.localisation
    assert loc is not None and loc.first is not None
    assert loc.first.device == "OPENVINO"
    assert loc.first.name == ("subgraph1" if order[0] == "OPENVINO" else "subgraph2")
    assert all(check.passed for check in loc.checked[:-1])
    placed = halves(model, *order)
    assert loc.first.nodes and all(placed[n] == "OPENVINO" for n in loc.first.nodes)


@needs_openvino
def test_the_cli_on_the_detector_split_both_ways(tmp_path):
    """hetero validate with the halves in an --affinity-file: PASSED at the measured tolerance, FAILED at
    zero naming the OpenVINO subgraph; the recogniser with its normalised input from --load-inputs."""
    det = fetch("ppocr_det")
    model = hc.Core().read_model(det)
    for order in ORDERS:
        affinities = tmp_path / f"{order[0]}.json"
        affinities.write_text(json.dumps(halves(model, *order)))
        args = [
            "validate",
            "-m",
            det,
            "-d",
            "HETERO:OPENVINO,CPU",
            "--affinity-file",
            affinities,
            "-data_shape",
        ]
        passed = invoke(hetero, *args, "[1,3,96,96]", "--atol", "5e-4", "--rtol", "1e-3")
        assert passed.exit_code == 0, passed.output
        assert passed.stdout.strip().splitlines()[-1] == "PASSED"
        failed = invoke(hetero, *args, "[1,3,96,96]", "--atol", "0", "--rtol", "0")
        assert failed.exit_code == 1, failed.output
        assert failed.stdout.strip().splitlines()[-1] == "FAILED"
        named = "subgraph1" if order[0] == "OPENVINO" else "subgraph2"
        assert f"The first subgraph that differs: {named} on OPENVINO" in failed.stdout

    rec = fetch("ppocr_rec")
    inputs = tmp_path / "rec_inputs.json"
    polygraphy_json.save_inputs(inputs, inputs_of("ppocr_rec"))
    affinities = tmp_path / "rec.json"
    affinities.write_text(json.dumps(halves(hc.Core().read_model(rec), "OPENVINO", "CPU")))
    result = invoke(
        hetero,
        "validate",
        "-m",
        rec,
        "-d",
        "HETERO:OPENVINO,CPU",
        "--affinity-file",
        affinities,
        "--load-inputs",
        inputs,
        "--atol",
        "2e-5",
        "--rtol",
        "1e-4",
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == "PASSED"
