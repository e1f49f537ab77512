"""How a hetero-cli command runs: its errors as one ``[ ERROR ]`` line and an exit status, library warnings as
``[ WARNING ]`` lines, and the files a failed command wrote removed again.

Exit statuses: 2 for usage errors (bad option or file argument, malformed device string, unknown device,
config key or affinity; a model or image that cannot be read or used), 1 for failures at run time (no listed
device available here, a subgraph that does not compile or run, a file that cannot be written), 130 when
interrupted, 0 otherwise. What a run needs to decide them (its phase, the files it wrote) is state of that
one invocation (``Invocation``, the click context's object), never of the module.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from ..errors import (
    AffinityError,
    ArtifactError,
    BenchmarkError,
    ConfigError,
    DeviceError,
    ExportError,
    HeteroError,
    ImageError,
    ModelError,
    NotClassScoresError,
    ServeError,
    ValidationError,
)
from ..runtime import interrupt_ends_process, set_log_level

log = logging.getLogger("hetero_cli")

#: click's context settings of every hetero-cli command.
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


class _WarningLines(logging.Handler):
    """Library warnings as ``[ WARNING ] message`` on the current stderr, each distinct message once; with
    ``level`` DEBUG (--debug) the library's debug and info lines too, as ``[ DEBUG ]`` and ``[ INFO ]``."""

    def __init__(self, level: int = logging.WARNING) -> None:
        super().__init__(level)
        self.seen: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = " ".join(record.getMessage().split())
        except Exception:  # a bad log call must not hide the real work
            return
        if message in self.seen:
            return
        self.seen.add(message)
        level = "ERROR" if record.levelno >= logging.ERROR else record.levelname
        click.echo(f"[ {level} ] {message}", err=True)


@dataclass
class Written:
    """What the running command has written, and the folders it created for it: a command that fails
    removes them again, so that it leaves nothing behind (.dot files written before a later usage error).
    Files that were there before the command (``before_writing``) are never removed, even if overwritten."""

    files: list[Path] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)
    existing: set[Path] = field(default_factory=set)

    def before_writing(self, path: Path, *, folder: bool) -> None:
        """Before writing ``path`` (a file, or with ``folder`` a folder files go into): note what is
        already there, and the folders the writing is about to create."""
        path = Path(path).absolute()
        if path.is_dir():
            self.existing.update(p for p in path.iterdir() if not p.is_dir())
        elif path.exists():
            self.existing.add(path)
        parent = path if folder else path.parent
        while not parent.exists() and parent != parent.parent:
            self.folders.append(parent)
            parent = parent.parent

    def wrote(self, path: Path) -> None:
        """Note a file written (unless it was there before the command)."""
        path = Path(path).absolute()
        if path not in self.existing:
            self.files.append(path)

    def keep(self) -> None:
        """Keep what was written even though the command exits non-zero: its answer, not an error (hetero
        validate's FAILED, a tune whose winner failed validation)."""
        self.files.clear()
        self.folders.clear()

    def remove(self) -> None:
        """Remove what was noted (created folders only if empty), then forget it."""
        for path in self.files:
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
        for folder in sorted(set(self.folders), key=lambda f: len(f.parts), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()
        self.files.clear()
        self.folders.clear()
        self.existing.clear()


@dataclass
class Invocation:
    """One run of a command, the click context's object: where it is, reading what the user gave
    ("input") or running it ("run"), which decides a device or model error's exit status; and what it wrote."""

    phase: str = "input"
    written: Written = field(default_factory=Written)


def invocation() -> Invocation:
    """The running command's ``Invocation``, from click's current context (a fresh one for a command that
    click's own main runs, outside ``_Main.main``). Raises RuntimeError outside a command."""
    return click.get_current_context().ensure_object(Invocation)


def running() -> None:
    """Mark the start of the run-time part of a command: device or model errors after it exit with 1."""
    invocation().phase = "run"


def written() -> Written:
    """What the running command has written so far: note files in it, so that a failure removes them."""
    return invocation().written


def _unknown_option(exc: click.UsageError, argv: Sequence[str]) -> str | None:
    """The message for an unknown single-dash option as typed (``-nireqq``), where click, reading it as a
    cluster of short options, names only its first letter (``-n``); None for any other usage error."""
    if not isinstance(exc, click.NoSuchOption) or exc.ctx is None or len(exc.option_name) != 2:
        return None
    known = [o for p in exc.ctx.command.params for o in getattr(p, "opts", ()) if o.startswith("-")]
    typed = [
        name
        for name in (a.split("=", 1)[0] for a in argv)
        if name.startswith(exc.option_name)
        and len(name) > 2
        and not name.startswith("--")
        and name not in known
    ]
    if not typed:
        return None
    name = typed[0]
    close = difflib.get_close_matches(name, known, n=1)
    return f"No such option '{name}'" + (f" (did you mean {close[0]}?)" if close else "")


def exit_code(exc: BaseException, phase: str = "input") -> int:
    """The exit status for ``exc`` raised in ``phase`` ("input" or "run"): 2 for usage errors, 1 for
    failures at run time (a device or model error is a usage error only while the input is read; an
    export an import refuses is the input's fault whenever the import finds it)."""
    usage = (
        ArtifactError
        | ConfigError
        | AffinityError
        | ImageError
        | BenchmarkError
        | NotClassScoresError
        | ValidationError
        | ServeError
        | ExportError
    )
    if isinstance(exc, usage):
        return 2
    if isinstance(exc, DeviceError | ModelError):
        return 2 if phase == "input" else 1
    return 1


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class _NeverRaised(Exception):
    pass


# click >= 8.2 raises this for a group called without a command (8.1 prints the help and exits 0 itself).
_NoArgsIsHelp: type[Exception] = getattr(click.exceptions, "NoArgsIsHelpError", _NeverRaised)


#: what every command's --help ends with: the environment variables hetero-cli reads and the exit statuses
ENVIRONMENT = (
    (
        "OPENVINO_HETERO_VISUALIZE=1",
        "write the .dot files of every split compiled (as OpenVINO's HETERO does)",
    ),
    ("HETERO_DEBUG=1", "as --debug: tracebacks on errors, debug lines, ONNX Runtime's warnings"),
    (
        "_HETERO_COMPLETE=bash_source",
        "print the shell completion script (zsh_source, fish_source too): "
        'eval "$(_HETERO_COMPLETE=bash_source hetero)"',
    ),
)
EXIT_STATUSES = (
    ("0", "done (hetero validate: PASSED)"),
    (
        "1",
        "failed at run time: no listed device here, a subgraph that does not compile or run, a file not "
        "written (hetero validate: FAILED)",
    ),
    ("2", "usage error: a bad option, device string, config key, affinity, model or input"),
    ("130", "interrupted"),
)


class _Main:
    """click's main() with hetero-cli's error handling: one line on stderr, exit 2 or 1, tracebacks on --debug;
    --help ends with the environment variables and exit statuses."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command's own epilog, then the environment variables and exit statuses."""
        super().format_epilog(ctx, formatter)  # type: ignore[misc]
        with formatter.section("Environment variables"):
            formatter.write_dl(ENVIRONMENT)
        with formatter.section("Exit statuses"):
            formatter.write_dl(EXIT_STATUSES)

    def _command_path(self, argv: Sequence[str], prog_name: str | None) -> str:
        """``hetero classify`` for a usage error click raised without a context (an option missing its
        value): the program, then the first argument that names one of this group's commands."""
        path = prog_name or Path(sys.argv[0]).name or "hetero"
        commands = getattr(self, "commands", {})
        name = next((a for a in argv if a in commands), None)
        return f"{path} {name}" if name else path

    def _error(
        self, exc: Exception, argv: Sequence[str], prog_name: str | None, phase: str
    ) -> tuple[str, int]:
        """The ``[ ERROR ]`` line's message for ``exc``, a failure of the command run on ``argv`` in
        ``phase``, and the exit status: a usage error points at --help, an unexpected error asks for a
        report."""
        if isinstance(exc, click.UsageError):
            path = exc.ctx.command_path if exc.ctx else self._command_path(argv, prog_name)
            message = _one_line(_unknown_option(exc, argv) or exc.format_message()).rstrip(".")
            return f"{message}. See '{path} --help'", 2
        if isinstance(exc, click.ClickException):
            return _one_line(exc.format_message()), exc.exit_code or 1
        if isinstance(exc, HeteroError):
            return _one_line(str(exc)), exit_code(exc, phase)
        if isinstance(exc, OSError):
            where = f" {exc.filename}" if exc.filename else ""
            return f"cannot access{where}: {exc.strerror or exc}", 1
        return (
            f"internal error: {type(exc).__name__}: {_one_line(str(exc))[:300]}. Run again with --debug for "
            "the traceback, and report it"
        ), 1

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command on ``args`` (else sys.argv): returns its exit status without ``standalone_mode``,
        else exits with it. ``extra`` goes to click's context (but ``obj``: that is this run's ``Invocation``)."""
        argv = list(sys.argv[1:] if args is None else args)
        debug = "--debug" in argv or bool(os.environ.get("HETERO_DEBUG"))
        run = Invocation()
        # ORT's process-wide logger writes straight to stderr (the OpenVINO EP's "[W:onnxruntime:Default,
        # ...] The input 'x' is not used" lines): noise a user cannot act on; failures still come as
        # exceptions. --debug keeps its warnings.
        set_log_level(debug)
        handler = _WarningLines(logging.DEBUG if debug else logging.WARNING)
        log.addHandler(handler)
        level = log.level
        if debug:  # the library's own debug lines (each QDQ group moved, ...)
            log.setLevel(logging.DEBUG)
        code = 1  # until the command returns: anything escaping below counts as a failure
        # the process is this command (arguments from sys.argv): Ctrl-C while ONNX Runtime compiles ends
        # it at once, where a KeyboardInterrupt would wait for the compile (runtime.interrupt_ends_process)
        interrupt_ends_process(args is None)
        try:
            rv = super().main(  # type: ignore[misc]
                argv, prog_name, complete_var, standalone_mode=False, obj=run, **extra
            )
            code = rv if isinstance(rv, int) else 0
        except _NoArgsIsHelp as exc:
            click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
            code = 0
        except (click.Abort, KeyboardInterrupt):
            click.echo("[ ERROR ] interrupted", err=True)
            code = 130
        except BrokenPipeError:
            code = 1
        except Exception as exc:
            if debug:
                traceback.print_exc()
            message, code = self._error(exc, argv, prog_name, run.phase)
            click.echo(f"[ ERROR ] {message}", err=True)
        finally:
            interrupt_ends_process(False)
            log.removeHandler(handler)
            log.setLevel(level)
            if code != 0:
                run.written.remove()
        if standalone_mode:
            sys.exit(code)
        return code


class Command(_Main, click.Command):
    """A command with hetero-cli's error handling."""


class Group(_Main, click.Group):
    """A group with hetero-cli's error handling; commands listed in the order they were added."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The commands' names, in the order they were added (``hetero --help`` lists them so)."""
        return list(self.commands)
