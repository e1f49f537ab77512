"""CompiledModel.export_model and Core.import_model: a self-contained artifact that imports without a query,
a partition or an export, and gives the exported split's outputs bit for bit; every damaged, tampered or
foreign artifact is one clear ArtifactError."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper as h
from onnx import numpy_helper
from runtime.test_fallback import _manual, run_failure_model
from support.helpers import hardmax_model, make_model, needs_openvino, seeded, vi

import hetero_cli as hc
from hetero_cli.ort.session import PROBE, SessionRequest, observe_sessions
from hetero_cli.runtime.artifacts import artifact, exporting

SPLIT = "HETERO:OPENVINO,CPU"
X = {"x": seeded((2, 4))}


def _same(got, want):
    assert list(got) == list(want)
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def _no_query(monkeypatch):
    """Fail the test where an import probes, partitions or exports a subgraph."""
    from hetero_cli.placement import export, partition, query

    def refuse(*args, **kwargs):
        raise AssertionError("an import must not query, partition or export")

    monkeypatch.setattr(query, "greedy", refuse)
    monkeypatch.setattr(partition, "partition", refuse)
    monkeypatch.setattr(export, "subgraph_model", refuse)
    monkeypatch.setattr("hetero_cli.runtime.compiler.subgraph_model", refuse)


def _round_trip(compiled, monkeypatch, feeds=X, **kwargs):
    want = compiled(feeds)
    data = compiled.export_model()
    seen: list[SessionRequest] = []
    with monkeypatch.context() as patch:
        _no_query(patch)
        with observe_sessions(seen.append):
            imported = hc.Core().import_model(data, **kwargs)
    assert all(r.purpose != PROBE for r in seen)
    _same(imported(feeds), want)
    return imported, data


@needs_openvino
@pytest.mark.parametrize("hint", ["THROUGHPUT", "LATENCY"])
def test_an_automatic_split_round_trips_bit_for_bit(monkeypatch, hint):
    compiled = hc.Core().compile_model(hardmax_model(), SPLIT, {"PERFORMANCE_HINT": hint})
    assert len(compiled.subgraphs) == 3
    imported, _ = _round_trip(compiled, monkeypatch)
    assert [(s.name, s.device, s.nodes) for s in imported.subgraphs] == [
        (s.name, s.device, s.nodes) for s in compiled.subgraphs
    ]
    assert imported.one_session == compiled.one_session
    assert imported.get_property("LOADED_FROM_CACHE") is True
    assert compiled.get_property("LOADED_FROM_CACHE") is False
    assert imported.get_property("EXECUTION_DEVICES") == compiled.get_property("EXECUTION_DEVICES")
    assert imported.get_property("PERFORMANCE_HINT") == hint
    assert imported.get_property("HETERO_FALLBACK") is compiled.get_property("HETERO_FALLBACK") is True


@needs_openvino
def test_an_import_asking_for_throughput_gives_each_subgraph_of_a_one_session_export_its_own(monkeypatch):
    compiled = hc.Core().compile_model(hardmax_model(), SPLIT, {"PERFORMANCE_HINT": "LATENCY"})
    assert compiled.one_session
    data = compiled.export_model()
    with monkeypatch.context() as patch:
        _no_query(patch)
        imported = hc.Core().import_model(data, config={"PERFORMANCE_HINT": "THROUGHPUT"})
    assert not imported.one_session
    assert [r.name for r in imported.runs] == [s.name for s in compiled.subgraphs]
    for name, value in compiled(X).items():
        np.testing.assert_allclose(imported(X)[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    assert hc.Core().import_model(data).one_session  # the export's own hint: as it ran


@needs_openvino
def test_a_split_by_hand_round_trips_from_a_path_and_a_file(tmp_path):
    affinities = {"matmul": "OPENVINO", "add": "CPU", "relu": "OPENVINO"}
    model = _manual(hardmax_model(), affinities, default="CPU")
    compiled = hc.Core().compile_model(model, SPLIT)
    path = tmp_path / "split.hetero"
    data = compiled.export_model(path)
    assert path.read_bytes() == data and [p.name for p in tmp_path.iterdir()] == ["split.hetero"]
    want = compiled(X)
    _same(hc.Core().import_model(path)(X), want)
    _same(hc.Core().import_model(str(path))(X), want)
    with path.open("rb") as stream:
        _same(hc.Core().import_model(stream)(X), want)
    assert hc.Core().import_model(data).get_property("HETERO_FALLBACK") is False  # manual mode's default


def test_an_import_returns_the_outputs_in_the_models_order():
    """The header's keys are sorted: outputs named against that order came back reordered before."""
    nodes = [
        h.make_node("Neg", ["x"], ["zeta"], name="neg"),
        h.make_node("Abs", ["x"], ["alpha"], name="abs"),
    ]
    proto = make_model(nodes, [vi("x", [2, 3])], [vi("zeta", [2, 3]), vi("alpha", [2, 3])], name="order")
    compiled = hc.Core().compile_model(proto, "HETERO:CPU")
    imported = hc.Core().import_model(compiled.export_model())
    x = {"x": seeded((2, 3))}
    assert list(imported(x)) == list(compiled(x)) == ["zeta", "alpha"]
    assert [o.get_any_name() for o in imported.outputs] == ["zeta", "alpha"]


def test_weights_are_inline_even_where_the_model_keeps_them_in_a_file(tmp_path):
    w = numpy_helper.from_array(seeded((4, 4), seed=3), "w")
    proto = make_model(
        [h.make_node("MatMul", ["x", "w"], ["m"], name="mm"), h.make_node("Relu", ["m"], ["y"], name="relu")],
        [vi("x", (2, 4))],
        [vi("y", (2, 4))],
        [w],
    )
    path = tmp_path / "m.onnx"
    onnx.save(proto, str(path), save_as_external_data=True, location="m.data", size_threshold=0)
    compiled = hc.Core().compile_model(hc.Core().read_model(path), "CPU")
    data = compiled.export_model()
    unpacked = artifact.unpack(data, "it")
    for payload in unpacked.payloads:
        held = onnx.load_from_string(bytes(payload))
        assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in held.graph.initializer)
    (tmp_path / "m.data").unlink()
    _same(hc.Core().import_model(data)(X), compiled(X))


def test_a_model_read_from_an_export_saves_with_its_weights_in_itself(tmp_path):
    """Model.save of an export's model (its weights byte ranges of the .hetero file): the .onnx holds them,
    so an export written again under that name (another placement) leaves it right; it pointed into the
    old file's offsets and gave NaN."""
    w = numpy_helper.from_array(seeded((64, 64), seed=5), "w")  # large enough to stay in the export's file
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
        h.make_node("Relu", ["m"], ["y"], name="relu"),
    ]
    proto = make_model(nodes, [vi("x", (2, 64))], [vi("y", (2, 64))], [w])
    x = {"x": seeded((2, 64), seed=6)}
    export = tmp_path / "m.hetero"
    hc.Core().compile_model(proto, "CPU").export_model(export)
    saved = tmp_path / "saved.onnx"
    hc.Core().read_model(export).save(saved)
    held = onnx.load(str(saved), load_external_data=False)
    assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in held.graph.initializer)
    want = hc.Core().compile_model(proto, "CPU")(x)["y"]
    other = make_model(
        [*nodes, h.make_node("Neg", ["y"], ["z"], name="neg")], [vi("x", (2, 64))], [vi("z", (2, 64))], [w]
    )
    hc.Core().compile_model(other, "CPU").export_model(export)  # the name written again
    np.testing.assert_array_equal(hc.Core().compile_model(saved, "CPU")(x)["y"], want)


@needs_openvino
def test_after_a_fallback_the_export_holds_the_moved_placement():
    proto, feeds, affinities = run_failure_model()
    compiled = hc.Core().compile_model(_manual(proto, affinities), SPLIT, {"HETERO_FALLBACK": "YES"})
    assert "OPENVINO" in [s.device for s in compiled.subgraphs]
    want = compiled(feeds)  # the OPENVINO subgraph fails its first run and moves to the CPU
    assert [s.device for s in compiled.subgraphs] == ["CPU", "CPU"]
    imported = hc.Core().import_model(compiled.export_model())
    assert [s.device for s in imported.subgraphs] == ["CPU", "CPU"]
    _same(imported(feeds), want)


@needs_openvino
def test_devices_the_import_lacks_move_to_the_cpu_with_a_warning(caplog):
    compiled = hc.Core().compile_model(hardmax_model(), SPLIT, {"PERFORMANCE_HINT": "THROUGHPUT"})
    data = compiled.export_model()
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        imported = hc.Core().import_model(data, "CPU")
    assert [s.device for s in imported.subgraphs] == ["CPU", "CPU", "CPU"]
    moved = [r.getMessage() for r in caplog.records if "which this import does not have" in r.getMessage()]
    assert len(moved) == 2 and "subgraph1 (3 node(s)) was compiled for OPENVINO" in moved[0]
    np.testing.assert_allclose(imported(X)["y"], compiled(X)["y"], rtol=1e-5, atol=1e-6)
    # a plan for a device this machine has no EP for (a GPU machine's export) loads on the CPU too
    gpu = _repacked(data, lambda header: _retarget(header, "OPENVINO", "GPU"))
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        moved_gpu = hc.Core().import_model(gpu)
    assert [s.device for s in moved_gpu.subgraphs] == ["CPU", "CPU", "CPU"]


def _retarget(header, old, new):
    header["device_name"] = header["device_name"].replace(old, new)
    for s in header["plan"]["subgraphs"]:
        s["device"] = new if s["device"] == old else s["device"]
    return header


def _repacked(data, change, payloads=None):
    """``data`` with its header changed by ``change`` (and payloads replaced), checksummed again: a
    consistent artifact an attacker (or another release) could write."""
    unpacked = artifact.unpack(data, "it")
    header = change(json.loads(json.dumps(unpacked.header)))
    return artifact.pack(header, [bytes(p) for p in (payloads or unpacked.payloads)])


@pytest.fixture(scope="module")
def exported() -> bytes:
    return hc.Core().compile_model(hardmax_model(), "CPU").export_model()


def _refused(data, *words):
    """The one-line ArtifactError of importing ``data``: from the bytes, and from a file (read as it lies,
    artifact.unpack_file), each giving the same message."""
    messages = []
    with pytest.raises(hc.ArtifactError) as refused:
        hc.Core().import_model(data)
    messages.append(str(refused.value))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "it.hetero"
        path.write_bytes(data)
        with pytest.raises(hc.ArtifactError) as refused:
            hc.Core().import_model(path)
        messages.append(str(refused.value).replace(str(path), "the export given as bytes"))
    message = messages[0]
    assert messages[1] == message
    assert "\n" not in message
    for word in words:
        assert word in message
    return message


def test_garbage_is_no_export(exported):
    _refused(b"\x08\x07garbage" * 10, "is not a hetero-cli export")
    _refused(hardmax_model().SerializeToString(), "is not a hetero-cli export")
    _refused(b"", "is not a hetero-cli export")


def test_a_truncated_export_is_refused(exported):
    for cut in (len(artifact.MAGIC) + 2, 30, len(exported) // 2, len(exported) - 1):
        message = _refused(exported[:cut])
        assert "truncated" in message or "damaged" in message


def test_a_tampered_export_fails_its_checksum(exported):
    tampered = bytearray(exported)
    tampered[len(exported) // 2] ^= 0xFF
    _refused(bytes(tampered), "damaged", "checksum")


def test_a_file_cut_short_while_it_is_read_is_refused(exported, tmp_path):
    path = tmp_path / "it.hetero"
    path.write_bytes(exported)
    with open(path, "rb") as file:
        short = io.BytesIO(file.read()[:-10])
    with pytest.raises(hc.ArtifactError, match="is truncated: it ended while it was read"):
        artifact.unpack_file(short, len(exported), str(path))


def test_an_oversized_length_is_refused_before_anything_is_read(exported):
    start = exported.index(b"\n") + 1
    huge = exported[:start] + (2**63).to_bytes(8, "big") + exported[start + 8 :]
    _refused(huge, "claims 9223372036854775808 bytes")
    header_len = int.from_bytes(exported[start : start + 8], "big")
    first = start + 8 + header_len
    lying = bytearray(exported[:first] + (2**40).to_bytes(8, "big") + exported[first + 8 : -32])
    _refused(bytes(lying) + hashlib.sha256(lying).digest(), "payload 1 claims")


def test_another_format_version_is_refused(exported):
    ours = f"HETERO-CLI EXPORT {artifact.FORMAT_VERSION}\n".encode()
    for version in (7, 1):  # a later format, and the first one (weights inline in every model)
        other = exported.replace(ours, f"HETERO-CLI EXPORT {version}\n".encode(), 1)
        _refused(
            other, f"format version {version}", f"this hetero-cli reads version {artifact.FORMAT_VERSION}"
        )


def test_another_hetero_cli_release_is_refused(exported):
    other = _repacked(exported, lambda header: {**header, "hetero_cli": "9.4.0"})
    _refused(other, "exported by hetero-cli 9.4.0", "compile the model again")


def test_an_external_data_location_is_refused_and_never_read(exported, tmp_path, monkeypatch):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.ones(8, np.float32).tobytes())
    unpacked = artifact.unpack(exported, "it")
    sub = onnx.load_from_string(bytes(unpacked.payloads[1]))
    tensor = sub.graph.initializer[0]
    tensor.ClearField("raw_data")
    del tensor.float_data[:]
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value="../../" + secret.name)
    payloads = [unpacked.payloads[0], sub.SerializeToString(), *unpacked.payloads[2:]]
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)  # where ../../secret.bin would be found: refused before any session reads it
    seen: list[SessionRequest] = []
    with observe_sessions(seen.append):
        _refused(
            _repacked(exported, lambda header: header, payloads), "refers to external data", "secret.bin"
        )
    assert seen == []


def test_a_header_that_lies_about_the_plan_is_refused(exported):
    def drop(header):
        header["plan"]["subgraphs"] = header["plan"]["subgraphs"] * 2
        return header

    _refused(_repacked(exported, drop), "its plan does not match")
    _refused(_repacked(exported, lambda header: {**header, "config": 5}), "its config is not what")


def test_a_text_stream_or_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(hc.ArtifactError, match="binary mode"):
        hc.Core().import_model(io.StringIO("HETERO"))
    with pytest.raises(hc.ArtifactError, match=r"cannot read .*nothing\.hetero"):
        hc.Core().import_model(tmp_path / "nothing.hetero")
    assert list(tmp_path.iterdir()) == []


def test_the_export_is_versioned_and_names_what_it_holds(exported):
    header = artifact.unpack(exported, "it").header
    assert header["hetero_cli"] == exporting.hetero_cli_version()
    assert {"onnx", "onnxruntime", "plan", "config", "device_name"} <= set(header)
    # the source model, each subgraph's, then the pool of their large weights (weight_pool.py)
    assert len(header["payloads"]) == 1 + len(header["plan"]["subgraphs"]) + 1
    assert len(header["weights"]) == 1 + len(header["plan"]["subgraphs"])


def test_paths_in_an_exports_config_are_left_out_with_a_warning(exported, caplog):
    def add_paths(header):
        header["config"]["devices"]["CPU"] = {"INFERENCE_NUM_THREADS": 1}
        header["config"]["hetero"]["HETERO_DOT_DIR"] = "/etc"
        return header

    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        imported = hc.Core().import_model(_repacked(exported, add_paths))
    assert "HETERO_DOT_DIR" not in imported.config.hetero
    assert imported.config.devices["CPU"] == {"INFERENCE_NUM_THREADS": 1}
    assert any("HETERO_DOT_DIR name paths and are not imported" in r.getMessage() for r in caplog.records)
    own = artifact.unpack(
        hc.Core().compile_model(hardmax_model(), "CPU", {"CACHE_DIR": "x"}).export_model(), "it"
    )
    assert "CACHE_DIR" not in own.header["config"]["hetero"]  # an export leaves machine-local keys out


def test_read_model_of_an_export_compiles_by_importing_it(tmp_path, monkeypatch):
    path = tmp_path / "named.onnx"  # an export, whatever its name
    compiled = hc.Core().compile_model(hardmax_model(), "HETERO:CPU")
    compiled.export_model(path)
    core = hc.Core()
    model = core.read_model(path)
    assert core.exported_device(model) == "HETERO:CPU" and len(model.get_ops()) == 6
    with monkeypatch.context() as patch:
        _no_query(patch)
        again = core.compile_model(model, "HETERO:CPU")
    assert (
        again.get_property("LOADED_FROM_CACHE") is True and again.model.proto is model.proto
    )  # the graph read
    _same(again(X), compiled(X))
    fresh = core.compile_model(model, "CPU")  # another device string: the model is compiled for it
    assert fresh.get_property("LOADED_FROM_CACHE") is False
    _same(fresh(X), compiled(X))


def test_a_model_protobuf_cannot_hold_is_a_model_error(monkeypatch, tmp_path):
    def too_big(models):  # what protobuf raises for a message over 2 GB
        raise ValueError("Message onnx.ModelProto exceeds maximum protobuf size of 2GB: 2400000000")

    compiled = hc.Core().compile_model(hardmax_model(), "CPU")
    monkeypatch.setattr(exporting.weight_pool, "pool", too_big)
    with pytest.raises(hc.ModelError, match=r"cannot be exported: .*2GB.*limits to 2 GB"):
        compiled.export_model(tmp_path / "out.hetero")
    assert list(tmp_path.iterdir()) == []


def test_an_import_parses_its_source_model_once(monkeypatch):
    """The check that the source model holds no external data parses it; read_model takes that parse,
    never the bytes again (a 54 MB model paid it twice)."""
    data = hc.Core().compile_model(hardmax_model(), "HETERO:CPU").export_model()
    parsed: list[int] = []
    load = onnx.load_from_string

    def counted(raw, *args, **kwargs):
        parsed.append(len(raw))
        return load(raw, *args, **kwargs)

    monkeypatch.setattr(onnx, "load_from_string", counted)
    imported = hc.Core().import_model(data)
    assert parsed == []
    _same(imported(X), hc.Core().compile_model(hardmax_model(), "HETERO:CPU")(X))


def test_an_export_goes_to_a_binary_stream_and_anything_else_is_refused(tmp_path):
    """export_model writes a binary stream as OpenVINO's does; other targets (a number, bytes, a text stream)
    are a ModelError each, and a file opened in text mode is refused by import_model (not a raw
    UnicodeDecodeError)."""
    compiled = hc.Core().compile_model(hardmax_model(), "CPU")
    stream = io.BytesIO()
    assert compiled.export_model(stream) == stream.getvalue()
    _same(hc.Core().import_model(io.BytesIO(stream.getvalue()))(X), compiled(X))
    for target, says in (
        (5, "cannot export to int"),
        (b"m.hetero", "cannot export to bytes"),
        (io.StringIO(), "text"),
    ):
        with pytest.raises(hc.ModelError, match=says):
            compiled.export_model(target)
    path = tmp_path / "m.hetero"
    compiled.export_model(path)
    with open(path) as text, pytest.raises(hc.ArtifactError, match="text stream"):
        hc.Core().import_model(text)
