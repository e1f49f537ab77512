"""Writing an export whole or not at all: into a temporary folder beside the output folder, renamed into
its place once everything is written; a failure (or Ctrl-C) leaves no trace of it."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import onnx

from ...errors import ExportError


def check_output_folder(out: Path, *, force: bool, keep: Sequence[Path] = ()) -> None:
    """ExportError where ``out`` cannot take an export: a file in its place, or a folder that exists
    and holds something (unless ``force``, which replaces it; never where it holds one of ``keep``: the
    model, the current directory)."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is no folder: give -o a folder name, or remove the file")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not force:
        raise ExportError(
            f"{out} exists and is not empty: give another -o folder, or --force to replace its content"
        )
    real = out.resolve()
    for path in keep:
        if Path(path).resolve().is_relative_to(real):
            raise ExportError(
                f"{out} holds {path}, which --force would delete with the rest of it: give -o a folder "
                "of its own"
            )


def write_folder(
    out: Path, fill: Callable[[Path], object], *, force: bool, keep: Sequence[Path] = ()
) -> None:
    """Make the folder ``out`` with what ``fill`` writes into an empty folder it is given: ``fill``
    writes into a temporary folder beside ``out`` (missing parents are created), which then takes
    ``out``'s place (``force``: an existing one's content is replaced, unless it holds one of ``keep``).
    On any failure, the temporary
    folder and the parents created are removed, ``out`` left as it was. An ``out`` that is a symbolic
    link stays one: what it leads to is the folder made (or replaced). Raises ExportError as
    check_output_folder, for a link that loops, and for a folder that cannot be written (saying why)."""
    given = Path(out).absolute()
    check_output_folder(given, force=force, keep=keep)
    out = Path(os.path.realpath(given))  # a link's folder, made beside where the link leads
    if out.is_symlink():
        raise ExportError(f"cannot write {given}: it is a symbolic link that loops: give -o a folder")
    created = _missing_parents(out)
    tmp = out.parent / f".{out.name}.partial-{secrets.token_hex(4)}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        fill(tmp)
        _replace(tmp, out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        for folder in created:  # deepest first; only if still empty
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(exc, OSError):
            raise ExportError(f"cannot write {given}: {exc.strerror or exc}") from None
        raise


def save_onnx(proto: onnx.ModelProto, path: Path) -> Path:
    """Save ``proto`` at ``path``; weights over protobuf's 2 GiB limit go to ``<path>.data`` beside it."""
    if proto.ByteSize() < 2**31 - 2**20:
        path.write_bytes(proto.SerializeToString())
    else:
        onnx.save_model(proto, str(path), save_as_external_data=True, location=f"{path.name}.data")
    return path


def _missing_parents(out: Path) -> list[Path]:
    """The folders above ``out`` that do not exist yet, deepest first."""
    missing = []
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    return missing


def _replace(tmp: Path, out: Path) -> None:
    """Put the folder ``tmp`` in ``out``'s place: an existing ``out`` is moved aside first and removed
    once ``tmp`` is in place (put back should that rename fail)."""
    if not out.exists():
        os.replace(tmp, out)
        return
    old = out.parent / f".{out.name}.old-{secrets.token_hex(4)}"
    os.replace(out, old)
    try:
        os.replace(tmp, out)
    except OSError:
        os.replace(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)
