"""hetero validate's data files (hetero_cli.app.validate.polygraphy_json) against the real Polygraphy: what we
write, Polygraphy reads equal (its Python API and `polygraphy run --load-inputs/--load-outputs`), and what
Polygraphy writes (its API, `polygraphy data merge/concat`), we read equal; bad files are one clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h
from polygraphy.comparator import IterationResult, RunResults
from polygraphy.json import load_json, save_json
from polygraphy.logger import G_LOGGER
from support.helpers import ROOT, const, make_model, ort_run, vi

from hetero_cli.app.validate.compare import compare_outputs
from hetero_cli.app.validate.polygraphy_json import load_inputs, load_outputs, save_inputs, save_outputs
from hetero_cli.app.validate.tolerances import Tolerances
from hetero_cli.errors import ValidationError

G_LOGGER.module_severity = G_LOGGER.CRITICAL
POLYGRAPHY = [sys.executable, "-m", "polygraphy"]
if Path(sys.executable).with_name("polygraphy").exists():
    POLYGRAPHY = [str(Path(sys.executable).with_name("polygraphy"))]


def arrays() -> dict[str, np.ndarray]:
    """One array of each kind a model hands over: dtypes, a 0-d value, empty shapes, a non-contiguous view."""
    rng = np.random.default_rng(0)
    return {
        "f32": rng.standard_normal((2, 3)).astype(np.float32),
        "f16": rng.standard_normal(4).astype(np.float16),
        "i64": np.arange(-3, 3, dtype=np.int64).reshape(3, 2),
        "bool": np.array([[True, False, True]]),
        "u8": np.arange(250, 256, dtype=np.uint8),
        "scalar": np.array(2.5, np.float32),
        "empty": np.zeros((0, 3), np.float32),
        "empty_i64": np.zeros((2, 0, 1), np.int64),
        "strided": rng.standard_normal((4, 4)).astype(np.float32)[::2, ::-1],
        "with:colon": np.array([np.nan, np.inf, -np.inf], np.float64),
    }


def assert_arrays_equal(got, want) -> None:
    assert list(got) == list(want)
    for name in want:
        got_array, want_array = np.asarray(got[name]), want[name]
        assert isinstance(got[name], np.ndarray), name
        assert (got_array.dtype, got_array.shape) == (want_array.dtype, want_array.shape), name
        np.testing.assert_array_equal(got_array, want_array, err_msg=name)


def run_polygraphy(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*POLYGRAPHY, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


# ours -> Polygraphy


def test_polygraphy_reads_our_inputs_equal(tmp_path):
    feeds = [arrays(), {"f32": np.ones((2, 3), np.float32)}]
    save_inputs(tmp_path / "in.json", feeds)
    loaded = load_json(str(tmp_path / "in.json"))
    assert isinstance(loaded, list) and len(loaded) == 2
    for theirs, ours in zip(loaded, feeds, strict=True):
        assert_arrays_equal(theirs, ours)


def test_polygraphy_reads_our_outputs_equal(tmp_path):
    runs = {
        "split": [arrays(), {"f32": np.zeros((2, 3), np.float32)}],
        "whole:model": [arrays()],
    }
    save_outputs(tmp_path / "out.json", runs)
    loaded = RunResults.load(str(tmp_path / "out.json"))
    assert [name for name, _ in loaded.items()] == ["split", "whole:model"]
    for (runner, iterations), want in zip(loaded.items(), runs.values(), strict=True):
        assert len(iterations) == len(want)
        for iteration, want_outputs in zip(iterations, want, strict=True):
            assert isinstance(iteration, IterationResult)
            assert iteration.runner_name == runner
            assert_arrays_equal(dict(iteration.items()), want_outputs)


# Polygraphy -> ours


def test_we_read_polygraphys_inputs_equal(tmp_path):
    feeds = [arrays(), {"x": np.ones(3, np.float32)}]
    save_json(feeds, str(tmp_path / "in.json"))
    loaded = load_inputs(tmp_path / "in.json")
    assert len(loaded) == 2
    for ours, want in zip(loaded, feeds, strict=True):
        assert_arrays_equal(ours, want)


def test_a_single_feed_dict_is_one_iteration_as_polygraphy_reads_it(tmp_path):
    save_json(arrays(), str(tmp_path / "one.json"))
    (loaded,) = load_inputs(tmp_path / "one.json")
    assert_arrays_equal(loaded, arrays())


def test_we_read_polygraphys_outputs_equal(tmp_path):
    results = RunResults()
    results.append(
        ("onnxrt-runner-N0", [IterationResult(arrays(), runtime=0.5, runner_name="onnxrt-runner-N0")])
    )
    second = [
        IterationResult({"y": np.full(2, i, np.int64)}, runtime=0.1, runner_name="trt") for i in range(3)
    ]
    results.append(("trt", second))
    results.save(str(tmp_path / "out.json"))
    loaded = load_outputs(tmp_path / "out.json")
    assert list(loaded) == ["onnxrt-runner-N0", "trt"]
    assert_arrays_equal(loaded["onnxrt-runner-N0"][0], arrays())
    assert len(loaded["trt"]) == 3
    for i, outputs in enumerate(loaded["trt"]):
        assert_arrays_equal(outputs, {"y": np.full(2, i, np.int64)})


def test_we_read_polygraphys_per_iteration_folders(tmp_path):
    """An extensionless --save-inputs/--save-outputs path is a folder of 0000000000.json, ... files."""
    from polygraphy.json.serde import IterationWriter

    feeds = [{"x": np.full(2, i, np.float32)} for i in range(3)]
    with IterationWriter(str(tmp_path / "inputs")) as writer:
        for feed in feeds:
            writer.append(feed)
    loaded = load_inputs(tmp_path / "inputs")
    assert len(loaded) == 3
    for ours, want in zip(loaded, feeds, strict=True):
        assert_arrays_equal(ours, want)
    (tmp_path / "outputs").mkdir()
    for i in range(2):
        results = RunResults()
        results.append(("onnxrt", [IterationResult({"y": np.full(1, i, np.float32)}, runner_name="onnxrt")]))
        results.save(str(tmp_path / "outputs" / f"{i:010d}.json"))
    assert [o["y"][0] for o in load_outputs(tmp_path / "outputs")["onnxrt"]] == [0, 1]


def test_we_read_what_polygraphy_data_merge_and_concat_write(tmp_path):
    feed = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    outputs = {"y": np.ones((2, 3), np.float16), "idx": np.array([0, 1], np.int64)}
    save_json([feed], str(tmp_path / "in.json"))
    results = RunResults()
    results.append(("onnxrt", [IterationResult(outputs, runner_name="onnxrt")]))
    results.save(str(tmp_path / "out.json"))

    merged = run_polygraphy("data", "merge", "in.json", "out.json", "-o", "merged.json", cwd=tmp_path)
    assert merged.returncode == 0, merged.stderr
    (loaded,) = load_inputs(tmp_path / "merged.json")
    assert_arrays_equal(loaded, {**feed, **outputs})

    save_inputs(tmp_path / "ours.json", [{"x": np.zeros((2, 3), np.float32)}])
    concat = run_polygraphy("data", "concat", "in.json", "ours.json", "-o", "cat.json", cwd=tmp_path)
    assert concat.returncode == 0, concat.stderr
    assert [f["x"][0, 1] for f in load_inputs(tmp_path / "cat.json")] == [1, 0]

    save_outputs(tmp_path / "ours_out.json", {"onnxrt": [{"y": np.zeros((2, 3), np.float16)}]})
    concat = run_polygraphy("data", "concat", "out.json", "ours_out.json", "-o", "cat_out.json", cwd=tmp_path)
    assert concat.returncode == 0, concat.stderr
    assert [o["y"][0, 0] for o in load_outputs(tmp_path / "cat_out.json")["onnxrt"]] == [1, 0]


# The round trip the issue asks for: our files through `polygraphy run --load-inputs --load-outputs`


def small_model() -> onnx.ModelProto:
    """y = relu(x @ w + b) and its argmax: a float and an int64 output."""
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["xw"]),
        h.make_node("Add", ["xw", "b"], ["pre"]),
        h.make_node("Relu", ["pre"], ["y"]),
        h.make_node("ArgMax", ["y"], ["idx"], axis=1, keepdims=0),
    ]
    rng = np.random.default_rng(1)
    inits = [const("w", rng.standard_normal((3, 4))), const("b", rng.standard_normal(4))]
    return make_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 4]), vi("idx", [2], TensorProto.INT64)], inits)


def test_polygraphy_run_compares_against_our_files(tmp_path):
    model = small_model()
    onnx.save(model, str(tmp_path / "model.onnx"))
    rng = np.random.default_rng(2)
    feeds = [{"x": rng.standard_normal((2, 3)).astype(np.float32)} for _ in range(2)]
    reference = [ort_run(model, feed) for feed in feeds]
    save_inputs(tmp_path / "inputs.json", feeds)
    save_outputs(tmp_path / "golden.json", {"hetero-reference": reference})
    command = ["run", "model.onnx", "--onnxrt", "--load-inputs", "inputs.json"]

    same = run_polygraphy(*command, "--load-outputs", "golden.json", "--atol", "1e-5", cwd=tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "vs. hetero-reference | Passed: 2/2 iterations" in same.stdout + same.stderr

    perturbed = [{**outputs, "y": outputs["y"] + np.float32(0.01)} for outputs in reference]
    save_outputs(tmp_path / "perturbed.json", {"hetero-reference": perturbed})
    off = run_polygraphy(*command, "--load-outputs", "perturbed.json", "--atol", "1e-5", cwd=tmp_path)
    assert off.returncode != 0
    assert "Mismatched outputs: ['y']" in off.stdout + off.stderr
    assert "vs. hetero-reference | Passed: 0/2 iterations" in off.stdout + off.stderr
    # our comparison of the same arrays gives Polygraphy's verdict, output by output
    tolerances = Tolerances.parse(atol=["1e-5"])
    for outputs, want in zip(reference, perturbed, strict=True):
        assert [(c.name, c.passed) for c in compare_outputs(outputs, want, tolerances)] == [
            ("y", False),
            ("idx", True),
        ]
    # ... and passes once the tolerance for that output allows it: the per-output syntax reaches Polygraphy
    loose_args = Tolerances.parse(atol=["1e-5", "y:0.02"]).polygraphy_args()
    loose = run_polygraphy(*command, "--load-outputs", "perturbed.json", *loose_args, cwd=tmp_path)
    assert loose.returncode == 0, loose.stdout + loose.stderr

    # Polygraphy's own --save-inputs / --save-outputs come back to us equal
    saved = run_polygraphy(
        *command, "--save-inputs", "pg_in.json", "--save-outputs", "pg_out.json", cwd=tmp_path
    )
    assert saved.returncode == 0, saved.stderr
    for ours, want in zip(load_inputs(tmp_path / "pg_in.json"), feeds, strict=True):
        assert_arrays_equal(ours, want)
    ((runner, iterations),) = load_outputs(tmp_path / "pg_out.json").items()
    assert runner.startswith("onnxrt")
    for ours, want in zip(iterations, reference, strict=True):
        assert_arrays_equal(ours, want)


# Bad files: one ValidationError naming the file and what was expected


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def bad_array(payload: str) -> str:
    return json.dumps([{"x": {"array": payload, "polygraphy_class": "ndarray"}}])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "is not JSON"),
        ('{"a": [1, 2]}', "holds a dict of lists, not Polygraphy inputs: write it with `polygraphy run"),
        ("[1, 2]", "iteration 0 of"),
        ("[]", "holds no iterations"),
        ("3", "holds a number, not Polygraphy inputs"),
        (bad_array("!!!not base64 nor npy"), "an array payload that is not .npy data"),
        (bad_array("aGVsbG8="), "an array payload that is not .npy data"),
        (json.dumps([{"x": {"polygraphy_class": "ndarray"}}]), "without its 'array' text"),
        (json.dumps({"x": {"tensor": "AA==", "polygraphy_class": "Tensor"}}), "a dict of Polygraphy Tensors"),
    ],
)
def test_bad_inputs_files_are_one_clear_error(tmp_path, text, message):
    path = write(tmp_path / "in.json", text)
    with pytest.raises(ValidationError) as caught:
        load_inputs(path)
    assert str(path) in str(caught.value)
    assert message in str(caught.value)


def test_outputs_given_as_inputs_and_inputs_as_outputs_say_which_they_are(tmp_path):
    save_outputs(tmp_path / "out.json", {"r": [{"y": np.ones(1)}]})
    save_inputs(tmp_path / "in.json", [{"x": np.ones(1)}])
    with pytest.raises(
        ValidationError, match=r"out.json holds Polygraphy outputs \(RunResults\), not inputs"
    ):
        load_inputs(tmp_path / "out.json")
    with pytest.raises(
        ValidationError, match=r"in.json holds Polygraphy inputs \(feed dicts\), not Polygraphy"
    ):
        load_outputs(tmp_path / "in.json")


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {"lst": [["r", [{"y": 1}]]], "polygraphy_class": "RunResults"},
            "is not [runner name, [IterationResult",
        ),
        ({"lst": "no", "polygraphy_class": "RunResults"}, "is not [runner name, [IterationResult"),
        (
            {"outputs": {}, "runner_name": "r", "polygraphy_class": "IterationResult"},
            "holds a Polygraphy Iter",
        ),
        ({"lst": [], "polygraphy_class": "AccuracyResults"}, "holds a Polygraphy AccuracyResults, not"),
    ],
)
def test_bad_outputs_files_are_one_clear_error(tmp_path, document, message):
    path = write(tmp_path / "out.json", json.dumps(document))
    with pytest.raises(ValidationError) as caught:
        load_outputs(path)
    assert str(path) in str(caught.value) and message in str(caught.value)


def test_a_runner_twice_and_no_runs_are_refused(tmp_path):
    results = RunResults()
    results.append(("r", [IterationResult({"y": np.ones(1)}, runner_name="r")]))
    results.append(("r", [IterationResult({"y": np.ones(1)}, runner_name="r")]))
    results.save(str(tmp_path / "twice.json"))
    with pytest.raises(ValidationError, match="holds runner 'r' twice"):
        load_outputs(tmp_path / "twice.json")
    RunResults().save(str(tmp_path / "none.json"))
    with pytest.raises(ValidationError, match="holds no runs"):
        load_outputs(tmp_path / "none.json")


def test_missing_files_and_empty_folders_are_refused(tmp_path):
    for load in (load_inputs, load_outputs):
        with pytest.raises(ValidationError, match=r"nope\.json: no such file"):
            load(tmp_path / "nope.json")
        with pytest.raises(ValidationError, match=r"is a folder without Polygraphy \.json files"):
            load(tmp_path)


def test_old_polygraphy_markers_and_latin1_arrays_are_read(tmp_path):
    """Files from older Polygraphy: the legacy type marker, LazyNumpyArray, .npy bytes as latin-1 text."""
    import io

    buffer = io.BytesIO()
    np.save(buffer, np.arange(3, dtype=np.int32))
    array = {
        "array": buffer.getvalue().decode("latin-1"),
        "__polygraphy_encoded_ndarray": "polygraphy_serialized_json_type",
    }
    iteration = {
        "outputs": {"y": {"values": array, "polygraphy_class": "LazyNumpyArray"}},
        "runtime": 0.1,
        "runner_name": "old",
        "polygraphy_class": "IterationResult",
    }
    write(
        tmp_path / "old.json", json.dumps({"lst": [["old", [iteration]]], "polygraphy_class": "RunResults"})
    )
    assert_arrays_equal(load_outputs(tmp_path / "old.json")["old"][0], {"y": np.arange(3, dtype=np.int32)})
    # Polygraphy itself reads the same file the same way
    (theirs,) = RunResults.load(str(tmp_path / "old.json"))["old"]
    np.testing.assert_array_equal(theirs["y"], np.arange(3, dtype=np.int32))


# Writes: a temporary file renamed into place, nothing left on failure


def test_a_failed_write_leaves_nothing_and_keeps_the_old_file(tmp_path):
    target = tmp_path / "in.json"
    save_inputs(target, [{"x": np.ones(2, np.float32)}])
    before = target.read_bytes()
    with pytest.raises(ValidationError, match="'x' cannot be saved as Polygraphy data"):
        save_inputs(target, [{"x": np.array([object()], dtype=object)}])
    with pytest.raises(ValidationError, match="cannot be saved"):
        save_outputs(tmp_path / "out.json", {"r": [{"y": np.array([{}], dtype=object)}]})
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json"]


def test_a_write_into_a_file_fails_with_oserror_and_leaves_nothing(tmp_path):
    blocker = write(tmp_path / "file", "x")
    with pytest.raises(OSError):
        save_inputs(blocker / "in.json", [{"x": np.ones(1)}])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_writes_create_missing_folders(tmp_path):
    save_outputs(tmp_path / "a" / "b" / "out.json", {"r": [{"y": np.ones(1)}]})
    assert load_outputs(tmp_path / "a" / "b" / "out.json")["r"][0]["y"].tolist() == [1.0]


def test_the_package_does_not_import_polygraphy_at_run_time():
    code = (
        "import sys, hetero_cli.app.validate.polygraphy_json, hetero_cli.app.validate.compare, "
        "hetero_cli.app.validate.tolerances; print('polygraphy' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


def test_saved_files_have_the_umasks_permissions_as_polygraphys_own(tmp_path):
    before = os.umask(0o027)
    try:
        save_inputs(tmp_path / "in.json", [{"x": np.zeros(2, np.float32)}])
        save_outputs(tmp_path / "out.json", {"r": [{"y": np.zeros(2, np.float32)}]})
    finally:
        os.umask(before)
    assert {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()} == {
        "in.json": 0o640,
        "out.json": 0o640,
    }
