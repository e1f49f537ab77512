"""The console scripts ``hetero``, ``hello_classification`` and ``hello_query_device`` (pyproject.toml).

Each imports the command line only once it runs, inside its guard: loading ONNX Runtime, onnx and numpy
takes about half a second, and Ctrl-C then ended the program with a Python traceback. Now it ends as
Ctrl-C during a command does: ``[ ERROR ] interrupted`` on stderr and exit status 130; and an environment
without ONNX Runtime gets the one line that names the extras to install, exit status 1. Importing this
module loads none of them (the package's names are imported lazily: hetero_cli/__init__.py).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Any

from .errors import NoOnnxRuntimeError, StopServing

INTERRUPTED = 130  # a shell's status for a program ended by SIGINT; the command line's own (cli.runner)


def _command(name: str) -> Callable[[], Any]:
    """The click command ``name`` of cli.scripts, imported now; Ctrl-C meanwhile exits as a command would."""
    try:
        from .cli import scripts
    except KeyboardInterrupt:
        sys.stderr.write("[ ERROR ] interrupted\n")
        raise SystemExit(INTERRUPTED) from None
    except NoOnnxRuntimeError as exc:
        sys.stderr.write(f"[ ERROR ] {exc}\n")
        raise SystemExit(1) from None
    return getattr(scripts, name)


def hetero() -> None:
    """console script ``hetero``."""
    if sys.argv[1:2] == ["serve"]:
        _serve()
        return
    _command("main")()


def _serve() -> None:
    """``hetero serve``: from the first moment on, SIGTERM stops its start-up with exit 0 and one line
    (StopServing; the serve command takes over the signal once it runs), as it stops a running server."""

    def stop(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the start-up is unwinding already
        raise StopServing

    signal.signal(signal.SIGTERM, stop)
    try:
        _command("main")()
    except StopServing as exc:
        sys.stdout.write(f"[ INFO ] {exc}\n")
        raise SystemExit(0) from None
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # exiting: a late SIGTERM changes nothing


def hello_classification() -> None:
    """console script ``hello_classification`` (= ``hetero classify``)."""
    _command("hello_classification")()


def hello_query_device() -> None:
    """console script ``hello_query_device`` (= ``hetero devices``)."""
    _command("hello_query_device")()
