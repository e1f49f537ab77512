"""The one click type of every option that takes a real number (benchmark's -max_irate, tune's -t): a
finite number within the option's range. click's FloatRange takes ``nan`` (it compares false with any
bound) and ``inf``; neither is a rate, a budget or any other amount an option means."""

from __future__ import annotations

import math
from typing import Any

import click


class FiniteFloat(click.FloatRange):
    """click.FloatRange that refuses nan and inf too, as a usage error (one line, exit 2)."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """``value`` as a float within the range; fails (click.BadParameter) for text that is no number,
        nan, inf, or a number outside the range."""
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(
                f"{value!r} is not a finite number: give one in the range {self._describe_range()}",
                param,
                ctx,
            )
        return super().convert(number, param, ctx)
