"""CACHE_DIR: the first compile keeps its export in the folder, keyed by the model, device string, config and
versions; a later compile loads it (LOADED_FROM_CACHE). A damaged entry is a warning and a rebuild, an
unusable folder a warning and a normal compile; two processes sharing a cache never corrupt it."""

from __future__ import annotations

import logging
import subprocess
import textwrap

import numpy as np
import onnx
import pytest
from support.helpers import PYTHON, ROOT, chain_model, hardmax_model, seeded

import hetero_cli as hc
from hetero_cli.ort.session import PROBE, SessionRequest, observe_sessions
from hetero_cli.runtime import artifact

X = {"x": seeded((2, 4))}


def _entries(folder):
    return sorted(p.name for p in folder.iterdir())


def _warnings(caplog, words):
    return [
        r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and words in r.getMessage()
    ]


def test_the_second_compile_loads_the_first_ones_export(tmp_path):
    folder = tmp_path / "cache"
    core = hc.Core()
    core.set_property({"CACHE_DIR": str(folder)})
    assert core.get_property("HETERO", "CACHE_DIR") == str(folder)
    first = core.compile_model(hardmax_model(), "HETERO:CPU")
    assert first.get_property("LOADED_FROM_CACHE") is False
    (entry,) = _entries(folder)
    assert entry.endswith(".hetero") and len(entry) == 64 + len(".hetero")
    seen: list[SessionRequest] = []
    with observe_sessions(seen.append):
        second = core.compile_model(hardmax_model(), "HETERO:CPU")
    assert second.get_property("LOADED_FROM_CACHE") is True
    assert all(r.purpose != PROBE for r in seen)
    np.testing.assert_array_equal(second(X)["y"], first(X)["y"])
    assert _entries(folder) == [entry]


def test_the_key_holds_the_model_device_and_config(tmp_path):
    config = {"CACHE_DIR": str(tmp_path)}
    core = hc.Core()
    core.compile_model(hardmax_model(), "CPU", config)
    assert (
        core.compile_model(chain_model(shape=(2, 4)), "CPU", config).get_property("LOADED_FROM_CACHE")
        is False
    )
    assert (
        core.compile_model(hardmax_model(), "HETERO:CPU", config).get_property("LOADED_FROM_CACHE") is False
    )
    threads = {**config, "CPU": {"INFERENCE_NUM_THREADS": 1}}
    assert core.compile_model(hardmax_model(), "CPU", threads).get_property("LOADED_FROM_CACHE") is False
    assert len(_entries(tmp_path)) == 4
    assert core.compile_model(hardmax_model(), "CPU", threads).get_property("LOADED_FROM_CACHE") is True


def test_weights_in_the_models_file_are_in_the_key(tmp_path):
    proto = hardmax_model()
    path = tmp_path / "m.onnx"
    onnx.save(proto, str(path))
    config = {"CACHE_DIR": str(tmp_path / "cache")}
    hc.Core().compile_model(str(path), "CPU", config)
    assert hc.Core().compile_model(str(path), "CPU", config).get_property("LOADED_FROM_CACHE") is True
    weights = proto.graph.initializer[0]
    values = onnx.numpy_helper.to_array(weights) + 1
    weights.CopyFrom(onnx.numpy_helper.from_array(values, weights.name))
    onnx.save(proto, str(path))
    changed = hc.Core().compile_model(str(path), "CPU", config)
    assert changed.get_property("LOADED_FROM_CACHE") is False


def test_a_damaged_entry_is_a_warning_and_is_rebuilt(tmp_path, caplog):
    config = {"CACHE_DIR": str(tmp_path)}
    want = hc.Core().compile_model(hardmax_model(), "CPU", config)(X)
    (entry,) = tmp_path.iterdir()
    entry.write_bytes(entry.read_bytes()[:-100])
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        rebuilt = hc.Core().compile_model(hardmax_model(), "CPU", config)
    assert rebuilt.get_property("LOADED_FROM_CACHE") is False
    (warning,) = _warnings(caplog, "cannot be loaded")
    assert (
        str(entry) in warning and "the entry is damaged" in warning and "compiling the model again" in warning
    )
    np.testing.assert_array_equal(rebuilt(X)["y"], want["y"])
    artifact.unpack(entry.read_bytes(), "the entry")  # written whole again
    assert hc.Core().compile_model(hardmax_model(), "CPU", config).get_property("LOADED_FROM_CACHE") is True


@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_a_cache_folder_that_cannot_be_used_is_a_warning_and_a_normal_compile(tmp_path, caplog, where):
    file = tmp_path / "plain"
    file.write_text("not a folder")
    folder = file if where == "a file" else file / "cache"
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = hc.Core().compile_model(hardmax_model(), "CPU", {"CACHE_DIR": str(folder)})
    assert compiled.get_property("LOADED_FROM_CACHE") is False
    (warning,) = _warnings(caplog, "CACHE_DIR")
    assert str(folder) in warning and "compiling without the cache" in warning
    assert file.read_text() == "not a folder" and _entries(tmp_path) == ["plain"]


def test_an_entry_that_cannot_be_written_is_a_warning(tmp_path, caplog, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("tempfile.mkstemp", refuse)
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = hc.Core().compile_model(hardmax_model(), "CPU", {"CACHE_DIR": str(tmp_path)})
    (warning,) = _warnings(caplog, "could not be kept in CACHE_DIR")
    assert "Permission denied" in warning
    assert compiled(X)["y"].shape == (2, 4) and _entries(tmp_path) == []


def test_a_bad_cache_dir_value_is_a_config_error():
    with pytest.raises(hc.ConfigError, match="CACHE_DIR: give a folder path"):
        hc.Core().set_property({"CACHE_DIR": 5})


@pytest.mark.slow
def test_two_processes_compiling_into_one_cache_never_corrupt_it(tmp_path):
    model = tmp_path / "m.onnx"
    onnx.save(hardmax_model(), str(model))
    cache = tmp_path / "cache"
    script = textwrap.dedent(
        f"""
        import hetero_cli as hc
        for _ in range(3):
            compiled = hc.Core().compile_model({str(model)!r}, "HETERO:CPU", {{"CACHE_DIR": {str(cache)!r}}})
            print(compiled.get_property("LOADED_FROM_CACHE"))
        """
    )
    runs = [
        subprocess.Popen(
            [PYTHON, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        assert "cannot be loaded" not in err
        assert out.split()[-1] == "True"
    (entry,) = _entries(cache)
    artifact.unpack((cache / entry).read_bytes(), "the entry")
