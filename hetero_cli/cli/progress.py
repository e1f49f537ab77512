"""Progress on stderr while a command waits: a spinner for work of unknown length (the query, a compile)
and benchmark_app's progress bar for the measured loop. rich draws them only on a terminal, and they
vanish when done, so piped output and captured logs keep only the ``[ INFO ]`` lines. A session ONNX
Runtime takes long to create shows on the spinner (``still``), with the way out: Ctrl-C.

    with busy("Compiling the model"):
        compiled = core.compile_model(model, device)
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from ..runtime import sessions_in_creation

LONG_S = 10.0  # a session being created for longer is named on the spinner


def _console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


@contextlib.contextmanager
def busy(text: str) -> Iterator[None]:
    """A spinner with ``text`` on stderr while the block runs (nothing where stderr is no terminal). Lines
    the block prints on stdout print above the spinner where stdout is the terminal too, and go to stdout
    untouched where it is redirected."""
    from rich.live import Live
    from rich.spinner import Spinner

    console = _console()
    if not console.is_terminal:
        yield
        return
    both = sys.stdout.isatty()
    spinner = Spinner("dots", text)

    class Waiting:  # the spinner, its text made again at each refresh
        def __rich__(self) -> Spinner:
            spinner.update(text=still(text))
            return spinner

    with Live(
        Waiting(),
        console=console,
        transient=True,
        redirect_stdout=both,
        redirect_stderr=both,
    ):
        keep_cursor(console)
        yield


@contextlib.contextmanager
def bar(niter: int | None, duration: float | None) -> Iterator[Callable[[int, float], None]]:
    """benchmark_app's progress bar for a loop of ``niter`` iterations and / or ``duration`` seconds
    (whichever ends later); yields on_progress(iterations done, seconds elapsed) for app.benchmark.measure."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    total = float(niter) if niter else float(duration or 1)
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=_console(),
        transient=False,
    ) as progress:
        task = progress.add_task("Progress", total=total)

        def update(done: int, elapsed: float) -> None:
            if niter and duration:
                fraction = min(done / niter, elapsed / duration)
            elif niter:
                fraction = done / niter
            else:
                fraction = elapsed / (duration or 1)
            progress.update(task, completed=min(fraction, 1.0) * total)

        yield update


def keep_cursor(console: Any) -> None:
    """Show the cursor again under a live display (rich hides it while it draws): Ctrl-C while ONNX
    Runtime compiles ends the process at once (runtime.interrupt_ends_process), which would leave the
    user's terminal without a cursor."""
    console.show_cursor(True)


def still(text: str) -> str:
    """``text``, and where ONNX Runtime has been creating a session for LONG_S seconds or more, which and
    for how long: "Compiling the model: still compiling subgraph2 on OPENVINO (45 s); Ctrl-C stops"."""
    slow = [c for c in sessions_in_creation() if c.seconds >= LONG_S]
    if not slow:
        return text
    return f"{text}: still {slow[0].doing} ({slow[0].seconds:.0f} s); Ctrl-C stops"
