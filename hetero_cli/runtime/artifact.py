"""The export format of a compiled model: a framed, checksummed file that nothing in it can make a reader
read or write outside it.

    HETERO-CLI EXPORT <format version>\\n       the magic line
    uint64 big-endian header length, the header (UTF-8 JSON: the plan, the config, versions, payload sizes)
    per payload: uint64 big-endian length, its bytes (the source model, then each subgraph's ONNX model,
                 each without the data of its large weights; then those weights: weight_pool.py)
    32 bytes: SHA-256 of everything before them

``pack`` writes one; ``unpack`` checks one (every length against what is really there, before anything is
read by it; then the checksum) and hands back the header and the payloads, as views of the bytes given,
with where each lies in them.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ArtifactError

MAGIC = b"HETERO-CLI EXPORT "
FORMAT_VERSION = 2  # 2: large weights in a pool, each once (1: inline in each model)
_LENGTH = struct.Struct(">Q")
_DIGEST = hashlib.sha256().digest_size
#: the most a header may claim (it is JSON text: the plan's names, never weights)
MAX_HEADER = 64 * 1024 * 1024


@dataclass(frozen=True)
class Unpacked:
    """An artifact's JSON ``header``, its ``payloads`` (memoryviews into the artifact's bytes) and the
    ``offsets`` of those payloads in the artifact; ``file``: the file it was read from (importing.py sets
    it; None for bytes or a stream), whose ``stamp`` (size, mtime in ns, inode) then says whether it
    changed."""

    header: dict[str, Any]
    payloads: tuple[memoryview, ...]
    offsets: tuple[int, ...] = ()
    file: Path | None = None
    stamp: tuple[int, int, int] | None = None


def is_artifact(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes, at least len(MAGIC)) starts as an export does."""
    return bytes(head[: len(MAGIC)]) == MAGIC


def pack(header: dict[str, Any], payloads: Sequence[bytes | Sequence[bytes]]) -> bytes:
    """The artifact of ``header`` (JSON-ready; its ``payloads`` entry is set here: each payload's size)
    and ``payloads`` (each bytes, or a sequence of bytes written one after another: the weight pool's
    tensors), checksummed. The bytes are copied once, into the artifact."""
    chunked = [[p] if isinstance(p, bytes | bytearray | memoryview) else list(p) for p in payloads]
    sizes = [sum(len(c) for c in chunks) for chunks in chunked]
    text = json.dumps({**header, "payloads": sizes}, sort_keys=True).encode()
    parts = [MAGIC + str(FORMAT_VERSION).encode() + b"\n", _LENGTH.pack(len(text)), text]
    for size, chunks in zip(sizes, chunked, strict=True):
        parts += [_LENGTH.pack(size), *chunks]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return b"".join([*parts, digest.digest()])


def unpack(data: bytes | memoryview, where: str) -> Unpacked:
    """Check and take apart an artifact (``where`` names it in messages: a path, "these bytes").

    Raises ArtifactError for what is no export, another format version, a length that claims more than
    is there (truncated, or lying), a checksum that does not match, or a header that is not what
    ``pack`` writes.
    """
    view = memoryview(data)
    if not is_artifact(view[: len(MAGIC)]):
        raise ArtifactError(
            f"{where} is not a hetero-cli export (it does not start with {MAGIC.decode().strip()!r}): "
            "give a file `hetero compile` or CompiledModel.export_model wrote"
        )
    line_end = bytes(view[: len(MAGIC) + 16]).find(b"\n")
    version = bytes(view[len(MAGIC) : line_end]) if line_end > 0 else b""
    if version != str(FORMAT_VERSION).encode():
        shown = version.decode("ascii", "replace") or "unknown"
        raise ArtifactError(
            f"{where} is a hetero-cli export of format version {shown}; this hetero-cli reads version "
            f"{FORMAT_VERSION}: export the model again with this hetero-cli (hetero compile)"
        )
    end = len(view) - _DIGEST
    offset = line_end + 1
    header_bytes, offset = _frame(view, offset, end, where, "the header", MAX_HEADER)
    if end < offset or hashlib.sha256(view[:end]).digest() != bytes(view[end:]):
        raise ArtifactError(
            f"{where} is damaged: its SHA-256 checksum does not match its contents (changed or cut short "
            "after it was written): export the model again"
        )
    header = _header(header_bytes, where)
    payloads, offsets = [], []
    for i, size in enumerate(header["payloads"]):
        payload, offset = _frame(view, offset, end, where, f"payload {i + 1}", end)
        if len(payload) != size:
            raise ArtifactError(f"{where} is damaged: payload {i + 1} is not the size its header says")
        payloads.append(payload)
        offsets.append(offset - size)
    if offset != end:
        raise ArtifactError(f"{where} is damaged: {end - offset} byte(s) after its last payload")
    return Unpacked(header, tuple(payloads), tuple(offsets))


def _frame(
    view: memoryview, offset: int, end: int, where: str, what: str, limit: int
) -> tuple[memoryview, int]:
    """The length-prefixed frame at ``offset`` and the offset after it; ArtifactError where its length
    (or the length field itself) runs past ``end`` or over ``limit``."""
    if offset + _LENGTH.size > end:
        raise ArtifactError(f"{where} is truncated: it ends before {what}: export the model again")
    (size,) = _LENGTH.unpack(view[offset : offset + _LENGTH.size])
    start = offset + _LENGTH.size
    if size > limit or start + size > end:
        raise ArtifactError(
            f"{where} is truncated or damaged: {what} claims {size} bytes, more than the "
            f"{max(0, end - start)} left: export the model again"
        )
    return view[start : start + size], start + size


def _header(text: memoryview, where: str) -> dict[str, Any]:
    """The parsed header; ArtifactError where it is no JSON object with a list of payload sizes."""
    try:
        header = json.loads(bytes(text).decode())
    except (UnicodeDecodeError, ValueError):
        header = None
    sizes = header.get("payloads") if isinstance(header, dict) else None
    if not isinstance(sizes, list) or not all(isinstance(s, int) and s >= 0 for s in sizes):
        raise ArtifactError(f"{where} is damaged: its header is not what hetero-cli writes")
    return header
