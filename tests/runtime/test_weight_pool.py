"""An export keeps each large weight once (runtime/artifacts/weight_pool.py), and an import of an export on disk has
ONNX Runtime read the weights in the file rather than a serialized copy: the pool's table is untrusted
input like every other part of an artifact."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import onnx
import pytest
from support.exports import N
from support.exports import chain as _chain
from support.helpers import SKIP_NO_OPENVINO, seeded

import hetero_cli as hc
from hetero_cli.ort.session import SUBGRAPH, SessionRequest, observe_sessions
from hetero_cli.runtime.artifacts import artifact, weight_pool

X = {"x": seeded((2, N))}


def _split(openvino: bool = False) -> hc.CompiledModel:
    """The chain compiled for HETERO:CPU (the source model and its one subgraph share w1 and w2), or with
    ``openvino`` split by hand: mm2 on OPENVINO, the rest on the CPU, a session each."""
    core = hc.Core()
    model = core.read_model(_chain())
    if not openvino:
        return core.compile_model(model, "HETERO:CPU")
    for op in model.get_ops():
        op.get_rt_info()["affinity"] = "OPENVINO" if op.get_friendly_name() == "mm2" else "CPU"
    return core.compile_model(model, "HETERO:OPENVINO,CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})


def _sessions(source) -> tuple[hc.CompiledModel, list[SessionRequest]]:
    seen: list[SessionRequest] = []
    with observe_sessions(seen.append):
        imported = hc.Core().import_model(source)
    return imported, [r for r in seen if r.purpose == SUBGRAPH]


def _same(got, want):
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


@pytest.mark.parametrize(
    "openvino", [False, pytest.param(True, marks=[pytest.mark.openvino, SKIP_NO_OPENVINO])]
)
def test_each_large_weight_is_stored_once(openvino):
    compiled = _split(openvino)
    data = compiled.export_model()
    unpacked = artifact.unpack(data, "it")
    tables = unpacked.header[weight_pool.TABLES]
    assert len(tables) == 1 + len(compiled.subgraphs)
    assert set(tables[0]["initializers"]) == {"w1", "w2"}  # the small bias stays in the model
    assert len(tables[0]["constants"]) == 1  # c, by its node's index
    assert len(unpacked.payloads[-1]) == 3 * N * N * 4  # the pool: w1, w2 and c once each
    assert len(data) < 4 * N * N * 4  # not once per model that reads them
    for payload in unpacked.payloads[:-1]:
        model = onnx.load_from_string(bytes(payload))
        held = [*model.graph.initializer, *(a.t for n in model.graph.node for a in n.attribute)]
        assert all(len(t.raw_data) <= 1024 * 4 for t in held)


@pytest.mark.parametrize(
    "openvino", [False, pytest.param(True, marks=[pytest.mark.openvino, SKIP_NO_OPENVINO])]
)
def test_an_import_from_a_file_references_the_weights_in_it(tmp_path, openvino):
    compiled = _split(openvino)
    want = compiled(X)
    path = tmp_path / "split.hetero"
    compiled.export_model(path)
    from_file = path.read_bytes()
    imported, requests = _sessions(path)
    assert len(requests) == len(compiled.subgraphs)
    for request in requests:
        held = onnx.load_from_string(request.model)
        tensors = [*held.graph.initializer, *(a.t for n in held.graph.node for a in n.attribute)]
        external = [t for t in tensors if t.data_location == onnx.TensorProto.EXTERNAL]
        assert external and all(t.external_data[0].value == path.name for t in external)
        assert len(request.model) < N * N * 4  # a skeleton: the weights stay in the file
        assert request.device == "CPU" or (request.device == "OPENVINO" and openvino)
    _same(imported(X), want)
    with open(path, "rb") as file:  # the pool is checksummed as it is read, never held
        unpacked = artifact.unpack_file(file, path.stat().st_size, str(path))
    assert unpacked.payloads[-1] is None and all(p is not None for p in unpacked.payloads[:-1])
    assert unpacked.sizes == tuple(unpacked.header["payloads"]) and unpacked.sizes[-1] > N * N * 4
    damaged = bytearray(path.read_bytes())
    damaged[unpacked.offsets[-1] + unpacked.sizes[-1] // 2] ^= 0xFF  # a weight, only checksummed
    path.write_bytes(bytes(damaged))
    with pytest.raises(hc.ArtifactError, match="damaged: its SHA-256 checksum does not match"):
        hc.Core().import_model(path)
    path.write_bytes(bytes(damaged[:-1]))  # lose a byte: the header's payloads claim more than is left
    with pytest.raises(
        hc.ArtifactError, match=r"is truncated or damaged: its header says its \d+ payloads take"
    ):
        hc.Core().import_model(path)
    path.write_bytes(from_file)
    from_bytes, requests = _sessions(path.read_bytes())  # no file: the weights go back inline
    assert all(len(r.model) > N * N * 4 for r in requests)
    _same(from_bytes(X), want)


def test_a_file_name_sessions_cannot_reference_keeps_the_weights_inline(tmp_path):
    compiled = _split()
    path = tmp_path / "a:b.hetero"  # quirk openvino-colon-external-data: never a reference to such a name
    compiled.export_model(path)
    imported, requests = _sessions(path)
    for request in requests:
        held = onnx.load_from_string(request.model)
        assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in held.graph.initializer)
    _same(imported(X), compiled(X))


def test_the_source_model_of_an_export_on_disk_never_loads_the_export_as_a_model(tmp_path):
    compiled = _split()
    path = tmp_path / "split.hetero"
    compiled.export_model(path)
    core = hc.Core()
    model = core.read_model(path)
    assert model.session_file is None  # the file is an export, not this graph
    assert model.external_dir == path.resolve().parent
    again = core.compile_model(model, "CPU")  # another device string: compiled afresh from the references
    _same(again(X), compiled(X))


def _repacked(data: bytes, change) -> bytes:
    unpacked = artifact.unpack(data, "it")
    header = json.loads(json.dumps(unpacked.header))
    change(header[weight_pool.TABLES])
    return artifact.pack(header, [bytes(p) for p in unpacked.payloads])


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda tables: tables[1]["initializers"].update(w1=[0, 10**12]), "outside its"),
        (lambda tables: tables[1]["initializers"].update(w1=[-4, 16]), "outside its"),
        (lambda tables: tables[1]["initializers"].update(w1="everything"), "outside its"),
        (
            lambda tables: tables[1]["initializers"].update(w1=[0, 16]),
            "gives 'w1' 16 bytes, where its shape [64, 64] needs 16384",
        ),
        (lambda tables: tables[1]["initializers"].update(nothing=[0, 16]), "names 'nothing'"),
        (lambda tables: tables[1]["constants"].update({"0": [0, 16]}), "names the Constant at node 0"),
        (lambda tables: tables[1]["constants"].update({"-1": [0, 16]}), "names the Constant at node -1"),
        (lambda tables: tables[1]["constants"].update({"99": [0, 16]}), "names the Constant at node 99"),
        (lambda tables: tables.pop(), "weight tables do not match"),
        (lambda tables: tables.__setitem__(0, [1, 2]), "not what hetero-cli writes"),
        (lambda tables: tables[0].pop("constants"), "not what hetero-cli writes"),
    ],
)
def test_a_table_that_lies_is_refused_before_any_session(tmp_path, change, words):
    data = _repacked(_split().export_model(), change)
    for source in (data, tmp_path / "lying.hetero"):
        if not isinstance(source, bytes):
            source.write_bytes(data)
        seen: list[SessionRequest] = []
        with observe_sessions(seen.append), pytest.raises(hc.ArtifactError) as refused:
            hc.Core().import_model(source)
        assert words in str(refused.value) and "\n" not in str(refused.value)
        assert [r for r in seen if r.purpose == SUBGRAPH] == []


def test_a_file_changed_while_imported_is_refused(tmp_path):
    path = tmp_path / "split.hetero"
    _split().export_model(path)

    def touch(request: SessionRequest) -> None:
        if request.purpose == SUBGRAPH:
            stat = path.stat()
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))

    with observe_sessions(touch), pytest.raises(hc.ArtifactError, match="changed while it was imported"):
        hc.Core().import_model(path)


def test_a_model_made_from_another_ones_file_exports_its_weights_too(tmp_path):
    """A model whose weights are references into another model's file (validate's tapped reference,
    own_file=False) exports them like any other: the import never reads that file."""
    source = tmp_path / "chain.onnx"
    onnx.save(_chain(320), str(source))  # over 1 MiB: read_model leaves its weights in the file
    from hetero_cli.app.validate.reference import tapped_model

    core = hc.Core()
    tapped = tapped_model(core.read_model(source), ["r1"])
    assert any(t.data_location == onnx.TensorProto.EXTERNAL for t in tapped.skeleton.graph.initializer)
    compiled = core.compile_model(tapped, "CPU")
    feeds = {"x": seeded((2, 320))}
    want = compiled(feeds)
    path = tmp_path / "tapped.hetero"
    compiled.export_model(path)
    source.unlink()  # the import needs nothing but the export
    _same(hc.Core().import_model(path)(feeds), want)


def test_an_imported_model_whose_export_is_gone_says_so_when_exported_again(tmp_path):
    path = tmp_path / "split.hetero"
    _split().export_model(path)
    imported = hc.Core().import_model(path)
    path.unlink()  # its weights were read from there
    with pytest.raises(hc.ModelError) as refused:
        imported.export_model(tmp_path / "again.hetero")
    assert "changed or is gone since the model was read" in str(refused.value)
    assert "\n" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []


def test_a_session_made_after_the_export_was_replaced_is_refused(tmp_path):
    """An imported model reads its weights from the export's file whenever a session of it is made later
    (a compile on another device string, a fallback): a file renamed over it (a cache entry written again)
    is refused, never read as if it were the one imported."""
    path = tmp_path / "split.hetero"
    _split().export_model(path)
    core = hc.Core()
    model = core.read_model(path)
    other = tmp_path / "other.hetero"
    hc.Core().compile_model(_chain(), "HETERO:CPU", {"PERFORMANCE_HINT": "THROUGHPUT"}).export_model(other)
    other.replace(path)  # the same name, another file
    with pytest.raises(hc.ModelError, match="changed or is gone since the model was read"):
        core.compile_model(model, "CPU")


def test_an_external_data_file_gone_before_the_export_is_one_model_error(tmp_path):
    path = tmp_path / "chain.onnx"
    onnx.save(_chain(), str(path), save_as_external_data=True, location="chain.data", size_threshold=0)
    compiled = hc.Core().compile_model(hc.Core().read_model(path), "CPU")
    (tmp_path / "chain.data").unlink()
    with pytest.raises(hc.ModelError) as refused:
        compiled.export_model(tmp_path / "out.hetero")
    assert "cannot be read from" in str(refused.value) and "\n" not in str(refused.value)
    assert not (tmp_path / "out.hetero").exists()


def test_the_pool_lets_each_model_go_before_the_next_is_made():
    """An export makes the source model and each subgraph's, weights inline, one at a time: the pool holds
    their weights once, so no model may still be held while the next is made (all at once, a 2.24 GiB
    export peaked at 9.0 GiB)."""
    holders: list[int] = []

    def models():
        for _ in range(3):
            proto = _chain()
            yield proto
            holders.append(sys.getrefcount(proto) - 1)  # the references besides getrefcount's own

    pooled = weight_pool.pool(models())
    assert holders == [1, 1, 1]  # this frame's alone
    assert len(pooled.skeletons) == 3 and len(pooled.pool) == 3  # three models, their weights once
