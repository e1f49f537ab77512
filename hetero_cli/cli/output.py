"""What commands print: OpenVINO samples' ``[ INFO ]`` and ``[ WARNING ]`` lines, benchmark_app's step
headers, and the console and box style of the tables (rich, imported only when a table is printed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click


def info(message: str = "", *, err: bool = False) -> None:
    """One ``[ INFO ]`` line on stdout, as OpenVINO's Python samples print them (on stderr with ``err``,
    where stdout carries something else, such as query's --json)."""
    click.echo(f"[ INFO ] {message}".rstrip(), err=err)


def warn(message: str) -> None:
    """One ``[ WARNING ]`` line on stderr."""
    click.echo(f"[ WARNING ] {message}", err=True)


def step(number: int, text: str) -> None:
    """benchmark_app's step header."""
    click.echo(f"[Step {number}/11] {text}")


def new_table(title: str, columns: Sequence[str]) -> Any:
    """A rich table titled ``title`` with ``columns``, in the tables' style: a line under the header only,
    long cells folded. Rows are added to it, then ``console().print`` prints it."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title), box=box.SIMPLE_HEAD, show_edge=False, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def console() -> Any:
    """A rich console on stdout for a table: no highlighting, and no folding at 80 columns when piped."""
    from rich.console import Console

    out = Console(highlight=False, soft_wrap=False)
    if not out.is_terminal:
        out.width = max(out.width, 160)  # piped or captured: no folding at 80 columns
    return out
