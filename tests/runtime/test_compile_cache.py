"""CACHE_DIR: the first compile keeps its export in the folder, keyed by the model, device string, config and
versions; a later compile loads it (LOADED_FROM_CACHE). A damaged entry is a warning and a rebuild, an
unusable folder a warning and a normal compile; two processes sharing a cache never corrupt it."""

from __future__ import annotations

import errno
import logging
import subprocess
import textwrap

import numpy as np
import onnx
import pytest
from support.helpers import PYTHON, ROOT, chain_model, hardmax_model, make_model, needs_openvino, seeded, vi

import hetero_cli as hc
from hetero_cli.ort.session import PROBE, SessionRequest, observe_sessions
from hetero_cli.placement import config as cfg
from hetero_cli.placement import devices as registry
from hetero_cli.quirks.openvino import CPU_BLOB_UNREADABLE
from hetero_cli.runtime.artifacts import artifact
from hetero_cli.runtime.artifacts import cache as compile_cache

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


def _weighty_hardmax(n: int = 64) -> onnx.ModelProto:
    """x[2,n] -> MatMul w (n x n, large: left in the model's file when read) -> Hardmax -> MatMul w2 -> y:
    automatic HETERO:OPENVINO,CPU splits it around Hardmax, which the EP refuses."""
    w = onnx.numpy_helper.from_array(seeded((n, n), seed=1), "w")
    w2 = onnx.numpy_helper.from_array(seeded((n, n), seed=2), "w2")
    nodes = [
        onnx.helper.make_node("MatMul", ["x", "w"], ["a"], name="mm1"),
        onnx.helper.make_node("Hardmax", ["a"], ["b"], name="hardmax"),
        onnx.helper.make_node("MatMul", ["b", "w2"], ["y"], name="mm2"),
    ]
    return make_model(nodes, [vi("x", (2, n))], [vi("y", (2, n))], [w, w2])


@needs_openvino
@pytest.mark.parametrize("hint", ["LATENCY", "THROUGHPUT"])
def test_a_split_of_a_models_file_loads_with_its_weights_read_from_that_file(tmp_path, monkeypatch, hint):
    """The entry's sessions take the weights the model's read left in its file (the key vouches for the
    file), whether the split ran in one session (LATENCY) or a session per subgraph; outputs bit for bit."""
    path = tmp_path / "m.onnx"
    onnx.save(_weighty_hardmax(), str(path))
    config = {"CACHE_DIR": str(tmp_path / "cache"), "PERFORMANCE_HINT": hint}
    feeds = {"x": seeded((2, 64))}
    first = hc.Core().compile_model(str(path), "HETERO:OPENVINO,CPU", config)
    assert len(first.subgraphs) >= 2 and first.one_session == (hint == "LATENCY")
    seen: list[SessionRequest] = []
    with observe_sessions(seen.append):
        second = hc.Core().compile_model(str(path), "HETERO:OPENVINO,CPU", config)
    assert second.get_property("LOADED_FROM_CACHE") is True and second.one_session == first.one_session
    assert all(r.purpose != PROBE for r in seen)
    assert all(len(r.model) < 64 * 64 * 4 for r in seen)  # weights referenced in a file, never inline
    np.testing.assert_array_equal(second(feeds)["y"], first(feeds)["y"])


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
        str(entry) in warning
        and "the entry is truncated or damaged" in warning
        and "compiling the model again" in warning
    )
    np.testing.assert_array_equal(rebuilt(X)["y"], want["y"])
    artifact.unpack(entry.read_bytes(), "the entry")  # written whole again
    assert hc.Core().compile_model(hardmax_model(), "CPU", config).get_property("LOADED_FROM_CACHE") is True


def test_an_entry_kept_by_another_compile_meanwhile_is_never_replaced(tmp_path, monkeypatch):
    """Two processes compiling one model both find no entry; the first to finish keeps its entry, and the
    second's store leaves it alone: a process importing it reads weights from that very file."""
    config = {"CACHE_DIR": str(tmp_path)}
    hc.Core().compile_model(hardmax_model(), "CPU", config)
    (entry,) = tmp_path.iterdir()
    kept = entry.stat()
    monkeypatch.setattr(compile_cache, "load", lambda *args, **kwargs: None)  # as if written after the lookup
    again = hc.Core().compile_model(hardmax_model(), "CPU", config)
    assert again.get_property("LOADED_FROM_CACHE") is False
    assert list(tmp_path.iterdir()) == [entry]  # no temporary file left either
    assert (entry.stat().st_ino, entry.stat().st_mtime_ns) == (kept.st_ino, kept.st_mtime_ns)


def test_a_folder_with_an_entrys_name_is_a_warning_and_a_normal_compile(tmp_path, caplog):
    hc.Core().compile_model(hardmax_model(), "CPU", {"CACHE_DIR": str(tmp_path)})
    (entry,) = tmp_path.iterdir()
    entry.unlink()
    entry.mkdir()
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = hc.Core().compile_model(hardmax_model(), "CPU", {"CACHE_DIR": str(tmp_path)})
    (warning,) = _warnings(caplog, "could not be kept in CACHE_DIR")
    assert "something that is no file has that name" in warning
    assert compiled(X)["y"].shape == (2, 4) and _entries(tmp_path) == [entry.name] and entry.is_dir()


def test_without_hard_links_an_entry_is_written_by_a_rename(tmp_path, monkeypatch):
    def no_links(*args):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr("os.link", no_links)
    hc.Core().compile_model(hardmax_model(), "CPU", {"CACHE_DIR": str(tmp_path)})
    (entry,) = tmp_path.iterdir()
    artifact.unpack(entry.read_bytes(), "the entry")
    again = hc.Core().compile_model(hardmax_model(), "CPU", {"CACHE_DIR": str(tmp_path)})
    assert again.get_property("LOADED_FROM_CACHE") is True


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


def _blobs(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.blob"))


@needs_openvino
def test_openvino_on_the_cpu_gets_no_model_cache_from_cache_dir(tmp_path, monkeypatch):
    """OpenVINO's CPU device cannot read its blobs back inside the EP (quirk openvino-cpu-blob-unreadable,
    in force on the OpenVINO flavour here): with CACHE_DIR, the OPENVINO sessions on the CPU get no cache_dir
    and no blob is written anywhere, while the second compile loads hetero-cli's own entry."""
    monkeypatch.chdir(tmp_path)
    config = {"CACHE_DIR": str(tmp_path / "cache")}
    seen: list[SessionRequest] = []
    with observe_sessions(seen.append):
        first = hc.Core().compile_model(hardmax_model(), "HETERO:OPENVINO,CPU", config)
        again = hc.Core().compile_model(hardmax_model(), "HETERO:OPENVINO,CPU", config)
    options = _openvino_options(seen)
    assert options and not any("cache_dir" in o for o in options)
    assert _blobs(tmp_path) == [] and again.get_property("LOADED_FROM_CACHE") is True
    np.testing.assert_array_equal(again(X)["y"], first(X)["y"])


@pytest.mark.parametrize("device", ["OPENVINO.GPU", "OPENVINO.NPU"])
def test_openvino_on_other_hardware_gets_its_model_cache_in_a_subfolder_of_cache_dir(device, tmp_path):
    """Where OpenVINO's compile dominates (a GPU, an NPU), CACHE_DIR gives the EP its cache_dir in
    CACHE_DIR/openvino, unless the device's config sets its own; without CACHE_DIR, none."""
    target = registry.lookup(device)
    cache = str(tmp_path / "cache")
    options = cfg.split({"CACHE_DIR": cache}).settings(target).provider_options
    assert options["cache_dir"] == str(tmp_path / "cache" / "openvino")
    own = cfg.split({"CACHE_DIR": cache, device: {"cache_dir": "mine"}}).settings(target).provider_options
    assert own["cache_dir"] == "mine"
    assert "cache_dir" not in cfg.split({}).settings(target).provider_options
    assert (
        "cache_dir"
        not in cfg.split({"CACHE_DIR": cache}).settings(registry.lookup("OPENVINO")).provider_options
    )


@pytest.mark.parametrize("affected", [True, False])
def test_openvino_on_the_cpu_gets_its_model_cache_only_where_it_can_read_blobs_back(
    affected, tmp_path, monkeypatch
):
    """The CPU's exception is the quirk's hook, not a rule of its own: on a release without
    openvino-cpu-blob-unreadable, CACHE_DIR gives OPENVINO on the CPU its cache_dir like any device."""
    monkeypatch.setattr(cfg, "in_force", lambda record: affected and record is CPU_BLOB_UNREADABLE)
    options = cfg.split({"CACHE_DIR": str(tmp_path)}).settings(registry.lookup("OPENVINO")).provider_options
    assert options["device_type"] == "CPU"
    assert ("cache_dir" in options) is not affected


def _openvino_options(seen):
    return [
        dict(p[1]) for r in seen for p in r.providers if isinstance(p, tuple) and p[0].startswith("OpenVINO")
    ]


@needs_openvino
def test_a_cache_dir_that_cannot_be_used_gives_openvino_no_cache_either(tmp_path, caplog):
    file = tmp_path / "plain"
    file.write_text("not a folder")
    seen: list[SessionRequest] = []
    with caplog.at_level(logging.WARNING, logger="hetero_cli"), observe_sessions(seen.append):
        compiled = hc.Core().compile_model(hardmax_model(), "HETERO:OPENVINO,CPU", {"CACHE_DIR": str(file)})
    assert _warnings(caplog, "compiling without the cache")
    options = _openvino_options(seen)
    assert options and not any("cache_dir" in o for o in options)
    assert compiled(X)["y"].shape == (2, 4) and _entries(tmp_path) == ["plain"]


@needs_openvino
def test_a_query_with_a_cache_dir_that_cannot_be_used_answers_as_without(tmp_path, caplog):
    """A query's probes get OpenVINO's model cache as a compile's sessions do: a CACHE_DIR that is a file is
    the same warning, and no probe fails for it (the EP would claim nothing)."""
    file = tmp_path / "plain"
    file.write_text("not a folder")
    core = hc.Core()
    core.set_property({"CACHE_DIR": str(file)})
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        placed = core.query_model(hardmax_model(), "HETERO:OPENVINO,CPU")
    assert placed == hc.Core().query_model(hardmax_model(), "HETERO:OPENVINO,CPU")
    assert "OPENVINO" in placed.values() and _warnings(caplog, "compiling without the cache")


@needs_openvino
def test_an_openvino_cache_dir_set_by_hand_wins_and_no_cache_dir_writes_no_blob(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    own = tmp_path / "mine"
    config = {"CACHE_DIR": str(tmp_path / "cache"), "OPENVINO": {"cache_dir": str(own)}}
    hc.Core().compile_model(hardmax_model(), "HETERO:OPENVINO,CPU", config)
    assert _blobs(own) and not _blobs(tmp_path / "cache")
    hc.Core().compile_model(chain_model(("Relu", "Hardmax", "Neg")), "HETERO:OPENVINO,CPU")
    assert len(_blobs(tmp_path)) == len(_blobs(own))


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
