"""Polygraphy's tolerance options take several values at once (``--atol 1e-5 logits:1e-3``, argparse's
nargs="+"); click takes repeated options. The commands with tolerance options (validate, tune) parse their
arguments through ``spread_lists`` first, and refuse with ``check_outputs`` a tolerance for an output the
model lacks."""

from __future__ import annotations

from collections.abc import Sequence

import click

from ..app.validate import Tolerances
from ..graph import Model
from .runner import Command

#: Polygraphy's options that take several values at once (argparse's nargs="+"): ``--atol 1e-5 logits:1e-3``
LIST_OPTIONS = frozenset({"--atol", "--rtol", "--check-error-stat", "--error-quantile"})


def spread_lists(args: Sequence[str]) -> list[str]:
    """``args`` with each of LIST_OPTIONS' values after the first given its own option, as click takes
    repeated options: ``--atol 1e-5 logits:1e-3`` becomes ``--atol 1e-5 --atol logits:1e-3`` (the command
    takes no arguments, so a bare word after one of them can only be another of its values)."""
    out: list[str] = []
    current = None
    for arg in args:
        if arg == "--":
            current = None
        elif current is not None and not arg.startswith("-") and out[-1] != current:
            out.append(current)
        elif arg.startswith("-"):
            current = arg if arg in LIST_OPTIONS else None
        out.append(arg)
    return out


class ToleranceListsCommand(Command):
    """hetero-cli's command, taking Polygraphy's several values per tolerance option (spread_lists):
    hetero validate's and hetero tune's."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """click's parsing, after spread_lists."""
        return super().parse_args(ctx, spread_lists(args))


def check_outputs(tolerances: Tolerances, model: Model, options: str) -> None:
    """A usage error (click.BadParameter naming ``options``) where a tolerance option names an output
    ``model`` does not have: a typo would leave that output at the default tolerance unnoticed."""
    outputs = [o.name for o in model.outputs]
    unknown = tolerances.unknown_outputs(outputs)
    if unknown:
        raise click.BadParameter(
            f"names output(s) {', '.join(map(repr, unknown))} the model does not have: its outputs are "
            f"{', '.join(outputs)}",
            param_hint=options,
        )
