"""An export is untrusted input (issue 42): read with bounded memory and work whatever it holds (its
payloads' number and sizes checked against the file before any is read, its JSON header's nesting before
it is parsed), and every name its plan gives checked against its models at import: a damaged or foreign
export is one ArtifactError before any session, never an internal error or a device's failure later."""

from __future__ import annotations

import io
import json
import os

import pytest
from placement.test_shape_values import resize_model
from runtime.test_export_import import _refused
from support.exports import (
    FEEDS,
    chain,
    framed,
    listing_initializers,
    magic_line,
    repacked,
    split,
    split_export,
    with_model,
)
from support.helpers import assert_same, seeded

import hetero_cli as hc
from hetero_cli.ort.session import SessionRequest, observe_sessions
from hetero_cli.runtime.artifacts import artifact


@pytest.fixture(scope="module")
def exported() -> bytes:
    return split_export()


def _refused_before_any_session(data: bytes, *words: str) -> str:
    """The one-line ArtifactError of importing ``data`` (bytes and file alike: _refused), with no session
    created for it."""
    seen: list[SessionRequest] = []
    with observe_sessions(seen.append):
        message = _refused(data, *words)
    assert seen == []
    return message


class _Counted(io.RawIOBase):
    """A binary file that fails the test once more than ``most`` bytes are read from it."""

    def __init__(self, file: io.BufferedIOBase, most: int) -> None:
        self._file = file
        self._most = most
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        self.count += len(buffer)
        assert self.count <= self._most, f"read {self.count} bytes, more than {self._most}"
        return self._file.readinto(buffer)


def test_a_file_of_zeros_after_the_magic_line_is_refused_after_its_first_bytes(tmp_path):
    """2 GiB of zeros (a sparse file) after the magic line: a header of 0 bytes, no JSON, refused once the
    header's length is read; frame after empty frame was read (and held) to the end before."""
    path = tmp_path / "zeros.hetero"
    with open(path, "wb") as file:
        file.write(magic_line())
    os.truncate(path, 2 << 30)
    with open(path, "rb") as raw:
        counted = _Counted(raw, most=len(magic_line()) + 8)
        with pytest.raises(hc.ArtifactError, match="its header is not what hetero-cli writes"):
            artifact.unpack_file(counted, 2 << 30, str(path))
    with pytest.raises(hc.ArtifactError, match="its header is not what hetero-cli writes"):
        hc.Core().import_model(path)


def test_payload_sizes_are_checked_against_the_file_before_any_is_read(exported, tmp_path):
    """A header whose payload sizes do not add up to what follows it, or that lists more payloads than an
    export holds, is refused once the header is read: not a byte of a payload is."""
    unpacked = artifact.unpack(exported, "it")
    payloads = [bytes(p) for p in unpacked.payloads]
    sizes = unpacked.header["payloads"]
    path = tmp_path / "lying.hetero"

    def refused_reading_only_the_header(claimed: list, *words: str) -> None:
        text = json.dumps({**unpacked.header, "payloads": claimed}).encode()
        data = framed(text, payloads)
        path.write_bytes(data)
        with open(path, "rb") as raw:
            counted = _Counted(raw, most=len(magic_line()) + 8 + len(text))
            with pytest.raises(hc.ArtifactError) as refused:
                artifact.unpack_file(counted, len(data), str(path))
        assert all(word in str(refused.value) for word in words), str(refused.value)
        _refused(data, *words)

    refused_reading_only_the_header(
        [*sizes[:-1], sizes[-1] + 2**40], "is truncated or damaged: its header says"
    )
    refused_reading_only_the_header([0] * 100_000, f"at most {artifact.MAX_PAYLOADS}")
    refused_reading_only_the_header([*sizes[:-1], 1.5], "its header is not what hetero-cli writes")
    refused_reading_only_the_header([*sizes[:-1], True], "its header is not what hetero-cli writes")
    refused_reading_only_the_header(sizes[:-1], "its payloads are not the sizes its header says")


def test_a_header_nested_deeper_than_an_export_writes_is_one_line(exported):
    deep = b'{"payloads": [], "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    message = _refused(framed(deep), "is damaged: its header is JSON nested 200001 levels deep")
    assert f"at most {artifact.MAX_DEPTH}" in message
    _refused(framed(b'{"payloads": ' + b"[" * 40 + b"]" * 40 + b"}"), "nested 41 levels deep")
    # brackets inside strings are text, not nesting: such a header imports
    assert artifact.nesting(json.dumps({"a": "[[[{", "b": ['"]]}', "\\"]})) == 2
    noted = repacked(exported, lambda header: header.__setitem__("note", "[{" * 1000))
    imported = hc.Core().import_model(noted)
    assert imported(FEEDS)["y"].shape == FEEDS["x"].shape


@pytest.mark.parametrize("cut", range(len(artifact.MAGIC), len(magic_line())))
def test_an_export_cut_in_its_first_line_says_truncated(exported, cut):
    message = _refused(exported[:cut], "is truncated: it ends in its first line")
    assert "format version" not in message


def _subgraph(index: int, key: str, value) -> object:
    return lambda header: header["plan"]["subgraphs"][index].__setitem__(key, value)


def _plan(key: str, value) -> object:
    return lambda header: header["plan"].__setitem__(key, value)


def _rename_input(proto) -> None:
    proto.graph.input[0].name = "renamed"
    proto.graph.node[0].input[0] = "renamed"


def _rename_output(proto) -> None:
    proto.graph.output[0].name = "renamed"
    proto.graph.node[-1].output[0] = "renamed"


def _drop_table_entry(header) -> None:
    del header["weights"][2]["initializers"]["w2"]


PLAN_CASES = {
    "an input nothing hands on": (_subgraph(1, "inputs", ["r1", "ghost"]), "subgraph2 reads 'ghost'"),
    "an output no node makes": (_subgraph(1, "outputs", ["ghost"]), "subgraph2 hands on 'ghost'"),
    "an input read before it is made": (_subgraph(0, "inputs", ["x", "m2"]), "subgraph1 reads 'm2'"),
    "a model input the model lacks": (_plan("inputs", ["ghost"]), "inputs and outputs are not"),
    "a model output the model lacks": (_plan("outputs", ["ghost"]), "inputs and outputs are not"),
    "an output from a subgraph that does not make it": (
        _plan("output_sources", {"y": 0}),
        "'y' is said to come from 0",
    ),
    "an output from a subgraph there is not": (_plan("output_sources", {"y": 7}), "come from 7"),
    "an output from the inputs": (_plan("output_sources", {"y": "input"}), "come from 'input'"),
    "an output said to be a constant": (_plan("output_sources", {"y": "constant"}), "come from 'constant'"),
    "an output from nowhere": (_plan("output_sources", {}), "does not say where each model output"),
    "a node not in the model": (_subgraph(1, "nodes", ["mm2", "ghost"]), "subgraph2 runs 'ghost'"),
    "a constant node not in the model": (_subgraph(2, "constant_nodes", ["ghost"]), "runs 'ghost'"),
    "a node in two subgraphs": (_subgraph(1, "nodes", ["mm2", "relu"]), "both run 'relu'"),
    "a held value that is no shape value": (_subgraph(1, "fixed", ["r1"]), "subgraph2 holds 'r1'"),
    "an affinity for a node not in the model": (_plan("affinities", {"ghost": "CPU"}), "name 'ghost'"),
    "a folded node not in the model": (_plan("folded", ["ghost"]), "folded nodes are 'ghost'"),
    "no subgraph": (_plan("subgraphs", []), "its plan does not match"),
}


@pytest.mark.parametrize("case", PLAN_CASES)
def test_a_plan_that_names_what_its_models_lack_is_refused_at_import(exported, case):
    change, words = PLAN_CASES[case]
    _refused_before_any_session(repacked(exported, change), "is damaged: its plan does not match", words)


@pytest.mark.parametrize(
    ("index", "edit", "words"),
    [
        (2, _rename_input, "subgraph2's model reads ['renamed'], where its plan gives it ['r1']"),
        (2, _rename_output, "subgraph2's model makes ['renamed'], where its plan has it hand on ['m2']"),
        (1, lambda proto: proto.graph.node.pop(), "subgraph1's model does not run the nodes its plan"),
    ],
)
def test_a_subgraph_model_that_is_not_what_its_plan_says_is_refused_at_import(exported, index, edit, words):
    _refused_before_any_session(with_model(exported, index, edit), "is damaged", words)


def test_a_weight_table_missing_an_entry_is_refused_at_import(exported):
    message = _refused_before_any_session(repacked(exported, _drop_table_entry), "is damaged")
    assert "subgraph2's model has tensor 'w2', which holds no data" in message
    assert "its weight table does not give it its data" in message


WHOLE = {
    "the chain in three subgraphs": lambda: (split(chain(), ["mm2"]), FEEDS),
    "the chain as IR version 3, its initializers listed as inputs": lambda: (
        split(listing_initializers(chain()), ["mm2"]),
        FEEDS,
    ),
    "a resize sized by shape values, each subgraph holding them": lambda: (
        split(resize_model(), ["relu"]),
        {"x": seeded((1, 3, 8, 8))},
    ),
    "a resize whose shape values are folded": lambda: (
        split(resize_model(), ["shape", "gather", "mul", "concat"]),
        {"x": seeded((1, 3, 8, 8))},
    ),
}


@pytest.mark.parametrize("case", WHOLE)
def test_what_an_export_writes_imports_and_runs_as_exported(case):
    """What the checks above refuse is never what an export writes."""
    compiled, feeds = WHOLE[case]()
    imported = hc.Core().import_model(compiled.export_model())
    assert [s.name for s in imported.subgraphs] == [s.name for s in compiled.subgraphs]
    assert_same(imported(feeds), compiled(feeds))
