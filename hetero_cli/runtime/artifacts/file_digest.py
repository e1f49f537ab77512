"""The SHA-256 of a model's files for CACHE_DIR's key, remembered in the cache folder by what says a file
is unchanged, so that a compile the cache loads does not read every weight again to find its entry.

OpenVINO keys its cache by the model's path and checks the file's mtime and size. This keys by content
and remembers it as git's index does: by the file's device, inode, size, mtime and ctime (in ns). A
record is written only where the file's last change (its ctime, which no user sets) lies RACY_NS before
its hash began: a file written again within a file system's timestamp granularity of the hash could
otherwise keep the stat its record holds.

A record is as trusted as the entries beside it: whoever can write the cache folder can put any entry
under any key. A record that cannot be read, names another path or another stat is ignored (the file is
hashed again); one that cannot be written is left out.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat as stat_module
import tempfile
import time
from pathlib import Path

log = logging.getLogger("hetero_cli")

SUFFIX = ".digest"
#: how long before its hash a file must have last changed for its digest to be remembered
RACY_NS = 2_000_000_000
_CHUNK = 1 << 20
#: the most of a record read (one is about 200 bytes: more is damage)
RECORD_BYTES = 4096


def file_digest(path: Path, folder: Path | None = None) -> bytes:
    """The SHA-256 of the file ``path``: the one recorded in ``folder`` where the file's stat is still the
    recorded one, else read (and recorded there, where the module's rule allows). OSError where the file
    cannot be read."""
    real = path.resolve()
    stat = _stat(os.stat(real))
    record = _record_path(real, folder) if folder is not None else None
    if record is not None and (known := _recorded(record, real, stat)) is not None:
        return known
    started = time.time_ns()
    digest = hashlib.sha256()
    with open(real, "rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
    changed_ns = stat[-1]  # ctime
    if record is not None and _stat(os.stat(real)) == stat and changed_ns < started - RACY_NS:
        _write(record, {"path": str(real), "stat": list(stat), "sha256": digest.hexdigest()})
    return digest.digest()


def _stat(result: os.stat_result) -> tuple[int, ...]:
    """What says a file is unchanged: device, inode, size, mtime and ctime (last), in ns."""
    return (
        result.st_dev,
        result.st_ino,
        result.st_size,
        result.st_mtime_ns,
        result.st_ctime_ns,
    )


def _record_path(real: Path, folder: Path) -> Path:
    return folder / (hashlib.sha256(str(real).encode()).hexdigest() + SUFFIX)


def _recorded(record: Path, real: Path, stat: tuple[int, ...]) -> bytes | None:
    """The digest ``record`` holds for ``real`` at ``stat``; None where there is none, or it is for another
    path or stat, or is not what _write writes."""
    try:
        held = json.loads(_small_file(record))
        if held["path"] == str(real) and tuple(held["stat"]) == stat:
            digest = bytes.fromhex(held["sha256"])
            return digest if len(digest) == hashlib.sha256().digest_size else None
    except (OSError, ValueError, KeyError, TypeError, RecursionError):  # RecursionError: nested too deep
        return None  # no record, or a damaged one: the file is hashed again, which is always right
    return None


def _small_file(path: Path) -> bytes:
    """The first RECORD_BYTES of ``path``; OSError where it is no regular file (a pipe would never end)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat_module.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is no regular file")
        return os.read(fd, RECORD_BYTES)
    finally:
        os.close(fd)


def _write(record: Path, held: dict[str, object]) -> None:
    """Write ``held`` as ``record``, whole or not at all (a temporary file renamed over it)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=record.parent, prefix=".digest-")
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(held, out)
            os.replace(tmp, record)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as exc:  # the digest is only not remembered: the next compile hashes the file again
        log.debug("the digest of %s is not kept in %s: %s", held["path"], record.parent, exc)
