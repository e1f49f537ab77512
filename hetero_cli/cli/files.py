"""The files a command writes: refused up front where they could not be written (rather than after the
whole run), and noted in the invocation's ``Written`` so that a failure later removes them again."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from ..errors import HeteroError
from .runner import written


def check_writable(path: str | None, option: str, *, folder: bool) -> None:
    """Refuse now an output the command could only fail to write at its end, after the whole run: a usage
    error (click.BadParameter for ``option``) when ``path`` (a file, or with ``folder`` a folder to write
    into) cannot be written; nothing for no path."""
    problem = unwritable(Path(path), folder=folder) if path else None
    if problem:
        raise click.BadParameter(problem, param_hint=option)


def unwritable(given: Path, *, folder: bool) -> str | None:
    """Why ``given`` (a folder to write into, or a file) cannot be written, None if it can: missing folders
    on the way are fine (they are created) as long as the nearest existing one is a writable folder."""
    if folder and given.exists() and not given.is_dir():
        return f"cannot write into {given}: it is a file, not a folder"
    if not folder and given.is_dir():
        return f"{given} is a folder: give a file name"
    existing = given if folder else given.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, so {given} cannot be written"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"cannot write into {existing}: permission denied"
    return None


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
