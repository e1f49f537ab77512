"""CACHE_DIR's file digests: remembered by the file's stat, never trusted for a file changed since, never
recorded for a file changed just before its hash, and a record that cannot be read or written changes
nothing but the time."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from hetero_cli.runtime.artifacts import file_digest as fd


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(b"weights" * 1000)
    return path


def _reads(monkeypatch) -> list[str]:
    """The files file_digest opens from now on."""
    opened: list[str] = []

    def counting_open(file, *args, **kwargs):
        opened.append(str(file))
        return open(file, *args, **kwargs)

    monkeypatch.setattr(fd, "open", counting_open, raising=False)
    return opened


def _sha(path) -> bytes:
    return hashlib.sha256(path.read_bytes()).digest()


def test_an_unchanged_file_is_hashed_once(model_file, tmp_path, monkeypatch):
    monkeypatch.setattr(fd, "RACY_NS", 0)  # the file was just written: remembered anyway
    cache = tmp_path / "cache"
    cache.mkdir()
    assert fd.file_digest(model_file, cache) == _sha(model_file)
    (record,) = cache.iterdir()
    assert record.suffix == fd.SUFFIX
    opened = _reads(monkeypatch)
    assert fd.file_digest(model_file, cache) == _sha(model_file)
    assert opened == []


def test_a_file_changed_since_it_was_recorded_is_hashed_again(model_file, tmp_path, monkeypatch):
    monkeypatch.setattr(fd, "RACY_NS", 0)
    cache = tmp_path / "cache"
    cache.mkdir()
    fd.file_digest(model_file, cache)
    stat = model_file.stat()
    deadline = time.monotonic() + 10
    # rewritten until its ctime moves past the file system's timestamp granularity (RACY_NS's job, off here)
    while model_file.stat().st_ctime_ns == stat.st_ctime_ns and time.monotonic() < deadline:
        time.sleep(0.01)
        model_file.write_bytes(b"WEIGHTS" * 1000)  # the same size
        os.utime(model_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and mtime: only its ctime moves
    assert model_file.stat().st_ctime_ns != stat.st_ctime_ns
    assert fd.file_digest(model_file, cache) == _sha(model_file)


def test_a_file_changed_just_before_its_hash_is_not_remembered(model_file, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    assert fd.file_digest(model_file, cache) == _sha(model_file)
    assert list(cache.iterdir()) == []  # written within RACY_NS: a rewrite could keep its stat


@pytest.mark.parametrize(
    "record",
    [
        "not json",
        '{"path": "/elsewhere", "stat": [], "sha256": "00"}',
        '{"path": "{path}", "stat": "{stat}", "sha256": "abcd"}',
        '{"path": "{path}", "stat": "{stat}"}',
        "[1, 2]",
        "[" * 3000 + "]" * 3000,  # json.loads' RecursionError, which was an internal error
    ],
)
def test_a_record_that_is_not_what_it_should_be_is_ignored(model_file, tmp_path, monkeypatch, record):
    monkeypatch.setattr(fd, "RACY_NS", 0)
    cache = tmp_path / "cache"
    cache.mkdir()
    fd.file_digest(model_file, cache)
    (written,) = cache.iterdir()
    held = written.read_text()
    stat = held[held.index('"stat": ') + len('"stat": ') : held.index("]") + 1]
    path = str(model_file.resolve())
    written.write_text(record.replace('"{stat}"', stat).replace("{path}", path))
    assert fd.file_digest(model_file, cache) == _sha(model_file)


@pytest.mark.parametrize("kind", ["pipe", "folder"])
def test_a_record_that_is_no_file_is_ignored_without_waiting(model_file, tmp_path, kind):
    """A pipe named as the record was read, and the compile waited for a writer that never came."""
    cache = tmp_path / "cache"
    cache.mkdir()
    record = fd._record_path(model_file.resolve(), cache)
    os.mkfifo(record) if kind == "pipe" else record.mkdir()
    assert fd.file_digest(model_file, cache) == _sha(model_file)


def test_a_folder_that_cannot_be_written_still_gives_the_digest(model_file, tmp_path, monkeypatch):
    monkeypatch.setattr(fd, "RACY_NS", 0)
    assert fd.file_digest(model_file, tmp_path / "missing") == _sha(model_file)
    assert not (tmp_path / "missing").exists()
    assert fd.file_digest(model_file) == _sha(model_file)  # no folder: nothing remembered


def test_a_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(OSError):
        fd.file_digest(tmp_path / "gone.onnx", tmp_path)
