"""The export format of a compiled model: a framed, checksummed file that nothing in it can make a reader
read or write outside it.

    HETERO-CLI EXPORT <format version>\\n       the magic line
    uint64 big-endian header length, the header (UTF-8 JSON: the plan, the config, versions, payload sizes)
    per payload: uint64 big-endian length, its bytes (the source model, then each subgraph's ONNX model,
                 each without the data of its large weights; then those weights: weight_pool.py)
    32 bytes: SHA-256 of everything before them

``pack`` writes one; ``unpack`` (bytes) and ``unpack_file`` (a file, read once) check one: every length
against what is really there, before anything is read by it; the header (at most MAX_HEADER bytes of
JSON nested at most MAX_DEPTH deep) before the payloads, whose number and sizes it gives, all checked
against what is left before any is read; then the checksum of it all. Whatever a file holds, a reader
allocates no more than the file's size and walks it once. They hand back the header and the payloads,
with where each lies.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ...errors import ArtifactError, ModelError

MAGIC = b"HETERO-CLI EXPORT "
FORMAT_VERSION = 2  # 2: large weights in a pool, each once (1: inline in each model)
_LENGTH = struct.Struct(">Q")
_DIGEST = hashlib.sha256().digest_size
#: the most a header may claim (it is JSON text: the plan's names, never weights)
MAX_HEADER = 64 * 1024 * 1024
#: how deep its JSON may nest (what an export writes nests 5 deep; Python's json recurses per level)
MAX_DEPTH = 32
#: the most payloads an artifact holds (the source model, a model per subgraph, the pool)
MAX_PAYLOADS = 1 << 16
#: the most digits a format version has on the magic line
MAX_VERSION_DIGITS = 16
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Unpacked:
    """An artifact's JSON ``header``, its ``payloads`` (memoryviews into the artifact's bytes; the last,
    the weight pool, None where unpack_file left it in the file), the ``offsets`` of those payloads in the
    artifact and their ``sizes``; ``file``: the file it was read from (importing.py sets it; None for bytes
    or a stream), whose ``stamp`` (size, mtime in ns, inode) then says whether it changed."""

    header: dict[str, Any]
    payloads: tuple[memoryview | None, ...]
    offsets: tuple[int, ...] = ()
    sizes: tuple[int, ...] = ()
    file: Path | None = None
    stamp: tuple[int, int, int] | None = None


def is_artifact(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes, at least len(MAGIC)) starts as an export does."""
    return bytes(head[: len(MAGIC)]) == MAGIC


def pack(header: dict[str, Any], payloads: Sequence[bytes | Sequence[bytes]]) -> bytes:
    """The artifact of ``header`` (JSON-ready; its ``payloads`` entry is set here: each payload's size)
    and ``payloads`` (each bytes, or a sequence of bytes written one after another: the weight pool's
    tensors), checksummed. The bytes are copied once, into the artifact. ModelError for more than
    MAX_PAYLOADS payloads (what an import refuses)."""
    if len(payloads) > MAX_PAYLOADS:
        raise ModelError(
            f"a compiled model of {len(payloads) - 2} subgraphs cannot be exported: an export holds at most "
            f"{MAX_PAYLOADS - 2}; place the model's nodes in fewer subgraphs (affinities)"
        )
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
    """Check and take apart an artifact held in memory (``where`` names it in messages: a path, "these
    bytes"): its payloads are views of ``data``.

    Raises ArtifactError for what is no export, another format version, a length that claims more than
    is there (truncated, or lying), a header that is not what ``pack`` writes (no JSON, nested over
    MAX_DEPTH, payload sizes that do not add up to the file's), or a checksum that does not match.
    """
    view = memoryview(data)
    return _walk(_InMemory(view), len(view), where)


def unpack_file(file: BinaryIO, size: int, where: str) -> Unpacked:
    """Check and take apart the artifact of ``size`` bytes that ``file`` (open in binary mode, at its
    start) reads, as ``unpack`` does, reading it once, in order: every payload is held in memory but the
    last, the weight pool, which is only checksummed (its ``payloads`` entry is None): an import from a
    file references its weights there (weight_pool.py), so holding them too would read them twice.

    Raises ArtifactError as ``unpack``, and where the file ends before ``size`` (cut short meanwhile).
    """
    return _walk(_Streamed(file, where), size, where)


def _walk(reader: _InMemory | _Streamed, size: int, where: str) -> Unpacked:
    """``unpack``'s checks, in the order the artifact lies: the magic line, the header's length against
    what is left before the checksum, the header (a bounded JSON text: it says how many payloads follow
    and how long each is), those lengths against what is left (before a byte of a payload is read, so
    nothing is allocated for what is not there), each frame's length against the header's, then the
    checksum of everything read."""
    offset = _magic_line(reader, size, where)
    end = size - _DIGEST
    length, offset = _length(reader, offset, end, where, "the header", MAX_HEADER)
    header = _header(reader.take(length), where)
    offset += length
    sizes: list[int] = header["payloads"]
    _check_sizes(sizes, end - offset, where)
    payloads: list[memoryview | None] = []
    offsets: list[int] = []
    for index, expected in enumerate(sizes):
        length, offset = _length(reader, offset, end, where, f"payload {index + 1}", end)
        if length != expected:
            raise ArtifactError(f"{where} is damaged: its payloads are not the sizes its header says")
        payloads.append(reader.pool(length) if index == len(sizes) - 1 else reader.take(length))
        offsets.append(offset)
        offset += length
    digest = reader.digest()  # of what was read: the checksum itself is read after it
    if digest != bytes(reader.take(_DIGEST)):
        raise ArtifactError(
            f"{where} is damaged: its SHA-256 checksum does not match its contents (changed or cut short "
            "after it was written): export the model again"
        )
    return Unpacked(header, tuple(payloads), tuple(offsets), tuple(sizes))


def _check_sizes(sizes: list[int], left: int, where: str) -> None:
    """ArtifactError unless the header's payload ``sizes``, each with its length field, take exactly the
    ``left`` bytes before the checksum, and are no more than MAX_PAYLOADS."""
    if len(sizes) > MAX_PAYLOADS:
        raise ArtifactError(
            f"{where} is damaged: its header lists {len(sizes)} payloads, where an export holds at most "
            f"{MAX_PAYLOADS}: export the model again"
        )
    framed = sum(sizes) + _LENGTH.size * len(sizes)
    if framed > left:
        raise ArtifactError(
            f"{where} is truncated or damaged: its header says its {len(sizes)} payloads take {framed} bytes, "
            f"more than the {max(0, left)} left: export the model again"
        )
    if framed < left:
        raise ArtifactError(f"{where} is damaged: its payloads are not the sizes its header says")


def _magic_line(reader: _InMemory | _Streamed, size: int, where: str) -> int:
    """Read the magic line (at most MAX_VERSION_DIGITS after MAGIC, one byte at a time); the offset of
    what follows it. ArtifactError for what is no export, a file that ends inside that line, or another
    format version."""
    if not is_artifact(reader.take(min(size, len(MAGIC)))):
        raise ArtifactError(
            f"{where} is not a hetero-cli export (it does not start with {MAGIC.decode().strip()!r}): "
            "give a file `hetero compile` or CompiledModel.export_model wrote"
        )
    offset, version = len(MAGIC), b""
    while offset < min(size, len(MAGIC) + MAX_VERSION_DIGITS + 1):
        char = bytes(reader.take(1))
        offset += 1
        if char == b"\n":
            break
        version += char
    else:
        if offset >= size:
            raise ArtifactError(
                f"{where} is truncated: it ends in its first line, after {size} bytes: export the model again"
            )
        version += b"..."  # no line end where a version number would have ended
    if version != str(FORMAT_VERSION).encode():
        shown = version.decode("ascii", "replace") or "unknown"
        raise ArtifactError(
            f"{where} is a hetero-cli export of format version {shown}; this hetero-cli reads version "
            f"{FORMAT_VERSION}: export the model again with this hetero-cli (hetero compile)"
        )
    return offset


def _length(
    reader: _InMemory | _Streamed, offset: int, end: int, where: str, what: str, limit: int
) -> tuple[int, int]:
    """The length of the frame at ``offset`` (read) and the offset of its first byte; ArtifactError where
    that length (or the length field itself) runs past ``end`` or over ``limit``."""
    if offset + _LENGTH.size > end:
        raise ArtifactError(f"{where} is truncated: it ends before {what}: export the model again")
    (size,) = _LENGTH.unpack(reader.take(_LENGTH.size))
    start = offset + _LENGTH.size
    if size > limit or start + size > end:
        raise ArtifactError(
            f"{where} is truncated or damaged: {what} claims {size} bytes, more than the "
            f"{max(0, end - start)} left: export the model again"
        )
    return size, start


class _InMemory:
    """Reads an artifact held in memory: views, no copies; its checksum taken over it at the end."""

    def __init__(self, view: memoryview) -> None:
        self._view = view
        self._at = 0

    def take(self, count: int) -> memoryview:
        """The next ``count`` bytes (fewer at the end)."""
        self._at += count
        return self._view[self._at - count : self._at]

    def pool(self, count: int) -> memoryview:
        """The weight pool, the last payload: held as the others are (``take``)."""
        return self.take(count)

    def digest(self) -> bytes:
        """The SHA-256 of everything before the bytes read next."""
        return hashlib.sha256(self._view[: self._at]).digest()


class _Streamed:
    """Reads an artifact from a file, in order, hashing what it reads as it goes (the checksum needs no
    second pass); the weight pool it leaves in the file goes through one reused buffer, never held."""

    def __init__(self, file: BinaryIO, where: str) -> None:
        self._file = file
        self._where = where
        self._hash = hashlib.sha256()

    def take(self, count: int) -> memoryview:
        """The next ``count`` bytes, hashed; ArtifactError where the file ends first."""
        data = self._file.read(count)
        self._short(len(data), count)
        self._hash.update(data)
        return memoryview(data)

    def pool(self, count: int) -> None:
        """Hash the weight pool, the last payload's ``count`` bytes, without keeping them (None: an import
        references them in the file); ArtifactError where the file ends first."""
        buffer = memoryview(bytearray(min(count, _CHUNK)))
        while count:
            got = self._file.readinto(buffer[: min(count, len(buffer))])
            self._short(got or 0, min(count, len(buffer)))
            self._hash.update(buffer[:got])
            count -= got

    def digest(self) -> bytes:
        """The SHA-256 of everything read so far (the checksum is read after it: never hashed)."""
        return self._hash.digest()

    def _short(self, got: int, wanted: int) -> None:
        if got < wanted:
            raise ArtifactError(
                f"{self._where} is truncated: it ended while it was read (cut short meanwhile?): export the "
                "model again, and import it once nothing writes it"
            )


def _header(text: memoryview, where: str) -> dict[str, Any]:
    """The parsed header; ArtifactError where it is no JSON object with a list of payload sizes, or is
    nested deeper than MAX_DEPTH (told before json.loads, which recurses, ever sees it)."""
    try:
        decoded = bytes(text).decode()
    except UnicodeDecodeError:
        decoded = ""
    depth = nesting(decoded)
    if depth > MAX_DEPTH:
        raise ArtifactError(
            f"{where} is damaged: its header is JSON nested {depth} levels deep, where hetero-cli writes at "
            f"most {MAX_DEPTH}: export the model again"
        )
    try:
        header = json.loads(decoded)
    except ValueError:  # JSONDecodeError, or a number over Python's limit on an int's digits
        header = None
    sizes = header.get("payloads") if isinstance(header, dict) else None
    if not isinstance(sizes, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in sizes
    ):
        raise ArtifactError(f"{where} is damaged: its header is not what hetero-cli writes")
    return header


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def nesting(text: str) -> int:
    """How deep the arrays and objects of the JSON ``text`` nest at most (0 for a scalar), counted
    without recursion: its strings left out, then its brackets counted in order. Brackets a string
    that never ends holds count too (the text is no JSON then anyway)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)
