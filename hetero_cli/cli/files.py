"""The files a command writes: refused up front where they could not be written (rather than after the
whole run), and noted in the invocation's ``Written`` so that a failure later removes them again."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from ..app.benchmark.shapes import is_fixed
from ..app.paths import file_problem
from ..errors import HeteroError
from ..graph import Model
from .runner import written


def check_writable(path: str | None, option: str, *, folder: bool, in_place: bool = False) -> None:
    """Refuse now an output the command could only fail to write at its end, after the whole run: a usage
    error (click.BadParameter for ``option``) when ``path`` (a file, or with ``folder`` a folder to write
    into) cannot be written; nothing for no path. A file is written beside ``path`` and moved over it,
    unless ``in_place`` (written into ``path`` itself): so only then may ``path`` be a device or a pipe
    (/dev/stdout), which a move would replace with a file."""
    fix = f"give a {'folder' if folder else 'file path'} this user can write to"
    problem = unwritable(Path(path), folder=folder, fix=fix) if path else None
    if not problem and path and not folder and not in_place:
        problem = file_problem(path) if os.path.exists(path) else None
        problem = problem and f"{problem}, which writing {path} would replace with a file: give a file path"
    if problem:
        raise click.BadParameter(problem, param_hint=option)


def unwritable(given: Path, *, folder: bool, fix: str = "") -> str | None:
    """Why ``given`` (a folder to write into, or a file) cannot be written, None if it can. ``fix`` (what
    the user can do, "give a folder this user can write to") ends the reasons that come from the system.

    Tried, not read off permission bits (root passes every os.access check, yet cannot write under /proc
    or on a read-only mount): the folder, with any missing folders on the way created as the command
    would, gets a probe file created and removed; an existing file is opened for writing, not truncated.
    Whatever the check created is removed again, so that it leaves nothing behind.
    """
    try:
        if folder and given.exists() and not given.is_dir():
            return f"cannot write into {given}: it is a file, not a folder"
        if not folder and given.is_dir():
            return f"{given} is a folder: give a file name"
        into = given if folder else given.parent
        existing = into
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            return f"{existing} is a file, so {given} cannot be written"
    except OSError as exc:
        return f"cannot look at {exc.filename or given}: {_reason(exc)}{_then(fix)}"
    created: list[Path] = []
    try:
        for missing in reversed([into, *into.parents][: len(into.parts) - len(existing.parts)]):
            try:
                missing.mkdir()
            except OSError as exc:
                return f"cannot create the folder {missing}: {_reason(exc)}{_then(fix)}"
            created.append(missing)
        try:
            _probe(into)
        except OSError as exc:
            return f"cannot write into {into}: {_reason(exc)}{_then(fix)}"
        if not folder and given.is_file():
            try:
                os.close(os.open(given, os.O_WRONLY | os.O_NONBLOCK))
            except OSError as exc:
                return f"cannot write {given}: {_reason(exc)}{_then(fix)}"
        return None
    finally:
        for made in reversed(created):
            with contextlib.suppress(OSError):
                made.rmdir()


def _probe(folder: Path) -> None:
    """Create a file in ``folder`` and remove it again; raises OSError where that cannot be done."""
    handle, name = tempfile.mkstemp(prefix=".hetero-probe-", dir=folder)
    os.close(handle)
    os.unlink(name)


def _then(fix: str) -> str:
    return f"; {fix}" if fix else ""


def _reason(exc: OSError) -> str:
    """An OSError's reason as the end of a sentence ("permission denied", "read-only file system")."""
    reason = exc.strerror or str(exc)
    return reason[:1].lower() + reason[1:]


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether paths ``a`` and ``b`` name one file: one real path (symbolic links followed), or hard links
    of one inode. Two writes to it would leave only the second."""
    real_a, real_b = os.path.realpath(a), os.path.realpath(b)
    try:
        return real_a == real_b or os.path.samefile(real_a, real_b)
    except OSError:  # one of them does not exist (yet): only the same path is the same file
        return False


def check_report_folder(folder: str | None, report_type: str | None) -> None:
    """Refuse now a report folder (-report_folder, else here) the reports could only fail to go into."""
    if not report_type:
        return
    if folder:
        check_writable(folder, "-report_folder", folder=True)
        return
    check_current_directory("the reports", "-report_folder")


def check_current_directory(what: str, option: str) -> None:
    """Refuse now ``what`` going into the current directory where it cannot be written (a usage error that
    names ``option``, the option that puts it elsewhere)."""
    problem = unwritable(Path.cwd(), folder=True)
    if problem:
        raise click.UsageError(f"{what} go into the current directory, but {problem}: give {option} DIR")


def save_model(model: Model, path: str) -> None:
    """Save ``model`` at ``path`` (with any data file beside it), creating the folders on the way; a later
    failure removes what it wrote (``written``). Raises HeteroError where a folder cannot be created."""
    written().before_writing(Path(path).parent, folder=True)
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HeteroError(f"cannot write {path}: {exc.strerror or exc}") from None
    model.save(path)
    written().wrote(Path(path))


def benchmark_line(
    path: str, request: object, model: Model, sizes: Sequence[tuple[str, str | None]] = ()
) -> str:
    """The ``hetero benchmark`` command that runs a model saved at ``path`` as it is on ``request``: with
    ``sizes`` ((option, value) pairs: the -shape, -data_shape and -i it was sized with, None where not
    given) or --fill-dynamic where its inputs have dimensions no value fixes (else benchmark asks for them)."""
    line = f"hetero benchmark -m {shlex.quote(path)} -d {shlex.quote(str(request))}"
    given = [f"{option} {shlex.quote(value)}" for option, value in sizes if value]
    dynamic = any(i.shape is None or not all(map(is_fixed, i.shape)) for i in model.inputs)
    if dynamic:
        line += " " + (" ".join(given) or "--fill-dynamic")
    return f"`{line}`"


def write_json(path: str, doc: Any) -> None:
    """Write ``doc`` as JSON, creating the folders on the way; a later failure removes it (``written``).
    Raises HeteroError when it cannot be written."""
    written().before_writing(Path(path), folder=False)
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(doc, indent=4) + "\n", encoding="utf-8")
    except OSError as exc:
        raise HeteroError(f"cannot write {path}: {exc.strerror or exc}") from None
    written().wrote(Path(path))
