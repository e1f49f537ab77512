"""Polygraphy's tolerance options (``--atol``, ``--rtol``, ``--check-error-stat``, ``--error-quantile``):
their syntax, defaults and per-output resolution, so that ``hetero validate`` takes the options a Polygraphy
user already writes and reads them the same way.

Syntax, as ``polygraphy run`` parses it (tools/args/comparator/compare.py, CompareFuncSimpleArgs, through
tools/args/util parse_arglist_to_dict): every option takes one or more ``[<output>:]<value>``; a value with no
output name is the default for every output not named; the output name is everything before the LAST
``:`` (so an output called ``a:b`` is given as ``a:b:1e-3``); a later value for the same output (or the
default) wins. Defaults (SimpleCompareFunc): atol 1e-5, rtol 1e-5, check-error-stat ``elemwise``,
error-quantile 0.99.

Where this is stricter than Polygraphy: Polygraphy takes any value here and fails (or compares nonsense)
only later, after inference; a value that is not a number, a negative or NaN tolerance, a quantile outside
[0, 1] or an unknown statistic is a ValidationError here, before anything runs."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ...errors import ValidationError

DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-5
DEFAULT_CHECK_ERROR_STAT = "elemwise"
DEFAULT_ERROR_QUANTILE = 0.99
# Polygraphy's VALID_CHECK_ERROR_STATS, in its order.
CHECK_ERROR_STATS = ("max", "mean", "median", "elemwise", "quantile")

_SYNTAX = "[<output>:]<value>, e.g. 1e-5 or logits:1e-3"


def _non_negative(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and not math.isnan(value)
        and value >= 0
    )


@dataclass(frozen=True)
class OutputTolerance:
    """The tolerances that apply to one output: absolute and relative tolerance, the error statistic
    checked against them (one of CHECK_ERROR_STATS) and the quantile that ``quantile`` uses."""

    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL
    check_error_stat: str = DEFAULT_CHECK_ERROR_STAT
    error_quantile: float = DEFAULT_ERROR_QUANTILE

    def describe(self) -> str:
        """One line for a report, e.g. ``elemwise error, atol 1e-05, rtol 1e-05``."""
        stat = self.check_error_stat
        if stat == "quantile":
            stat = f"quantile {self.error_quantile:g}"
        return f"{stat} error, atol {self.atol:g}, rtol {self.rtol:g}"


@dataclass(frozen=True)
class Tolerances:
    """Every output's tolerances: ``default`` for an output not named; ``atol``, ``rtol``,
    ``check_error_stat`` and ``error_quantile`` hold the values given for named outputs (each option resolved
    on its own: ``--atol x:1`` leaves x's rtol at the default); Polygraphy's
    ``--infinities-compare-equal`` (matching +-inf count as equal rather than as a NaN difference); and
    ``nans_compare_equal`` (NaN on both sides counts as equal: no Polygraphy option, which fails every NaN;
    hetero tune's check sets it). Build it with ``Tolerances.parse`` from the command line's strings."""

    default: OutputTolerance = OutputTolerance()
    atol: Mapping[str, float] = field(default_factory=dict)
    rtol: Mapping[str, float] = field(default_factory=dict)
    check_error_stat: Mapping[str, str] = field(default_factory=dict)
    error_quantile: Mapping[str, float] = field(default_factory=dict)
    infinities_compare_equal: bool = False
    nans_compare_equal: bool = False

    def __post_init__(self) -> None:
        """ValidationError for fields of another kind (before a comparison fails on them in its own words)."""
        if not isinstance(self.default, OutputTolerance):
            raise ValidationError(
                f"Tolerances' default must be an OutputTolerance, not {type(self.default).__name__}"
            )
        for name in ("atol", "rtol", "error_quantile", "check_error_stat"):
            given = getattr(self, name)
            numbers = name != "check_error_stat"
            if not isinstance(given, Mapping) or not all(
                isinstance(k, str) and (_non_negative(v) if numbers else v in CHECK_ERROR_STATS)
                for k, v in given.items()
            ):
                kind = "a number 0 or more" if numbers else "a statistic"
                raise ValidationError(
                    f"Tolerances' {name} must be {{output name: {kind}}}, not {given!r:.60}: for every "
                    "output, use default=OutputTolerance(...), or Tolerances.parse"
                )

    @classmethod
    def parse(
        cls,
        atol: Sequence[str] = (),
        rtol: Sequence[str] = (),
        check_error_stat: Sequence[str] = (),
        error_quantile: Sequence[str] = (),
        *,
        infinities_compare_equal: bool = False,
        nans_compare_equal: bool = False,
    ) -> Tolerances:
        """Read Polygraphy's option values (each ``[<output>:]<value>``, as the user typed them after
        ``--atol`` and so on, and its flag ``--infinities-compare-equal``) into Tolerances; raises ValidationError, naming the option, the value and the
        syntax, for a value that is not a non-negative number (atol, rtol), not in [0, 1] (error-quantile)
        or not one of CHECK_ERROR_STATS (check-error-stat)."""
        atols = _parse_option("--atol", atol, _tolerance)
        rtols = _parse_option("--rtol", rtol, _tolerance)
        stats = _parse_option("--check-error-stat", check_error_stat, _stat)
        quantiles = _parse_option("--error-quantile", error_quantile, _quantile)
        default = OutputTolerance(
            atol=atols.pop("", DEFAULT_ATOL),
            rtol=rtols.pop("", DEFAULT_RTOL),
            check_error_stat=stats.pop("", DEFAULT_CHECK_ERROR_STAT),
            error_quantile=quantiles.pop("", DEFAULT_ERROR_QUANTILE),
        )
        return cls(default, atols, rtols, stats, quantiles, infinities_compare_equal, nans_compare_equal)

    def of(self, output_name: str) -> OutputTolerance:
        """The tolerances that apply to ``output_name``: its own value for each option given for it, the
        default for the others (Polygraphy's util.value_or_from_dict)."""
        d = self.default
        return OutputTolerance(
            atol=self.atol.get(output_name, d.atol),
            rtol=self.rtol.get(output_name, d.rtol),
            check_error_stat=self.check_error_stat.get(output_name, d.check_error_stat),
            error_quantile=self.error_quantile.get(output_name, d.error_quantile),
        )

    def unknown_outputs(self, names: Iterable[str]) -> list[str]:
        """The output names given per output that are not in ``names`` (the model's outputs), each once, in
        the order the options name them (atol's first), so the caller can refuse them (Polygraphy only warns,
        and a typo then silently leaves that output at the default)."""
        known = set(names)
        given: dict[str, None] = {}
        for per_output in (self.atol, self.rtol, self.check_error_stat, self.error_quantile):
            given.update(dict.fromkeys(per_output))
        return [name for name in given if name not in known]

    def polygraphy_args(self) -> list[str]:
        """The ``polygraphy run`` options that give these tolerances (``--atol 1e-05 logits:0.001 --rtol
        ...``), so a user can check a verdict with Polygraphy itself; ``Tolerances.parse`` reads them back
        equal. Values are written with repr, which float() reads back exactly. ``nans_compare_equal`` has
        no Polygraphy option: it is left out (Polygraphy fails every NaN)."""
        d = self.default
        args = ["--atol", repr(d.atol), *_named(self.atol), "--rtol", repr(d.rtol), *_named(self.rtol)]
        if self.check_error_stat or d.check_error_stat != DEFAULT_CHECK_ERROR_STAT:
            args += ["--check-error-stat", d.check_error_stat, *_named(self.check_error_stat)]
        if self.error_quantile or d.error_quantile != DEFAULT_ERROR_QUANTILE:
            args += ["--error-quantile", repr(d.error_quantile), *_named(self.error_quantile)]
        if self.infinities_compare_equal:
            args.append("--infinities-compare-equal")
        return args


def _named(per_output: Mapping[str, float | str]) -> list[str]:
    return [
        f"{name}:{value if isinstance(value, str) else repr(value)}" for name, value in per_output.items()
    ]


def _parse_option(option: str, values: Sequence[str], convert) -> dict:
    """{output name or "" for the default: converted value}, later values winning, each value split on its
    last ':' as Polygraphy's parse_arglist_to_tuple_list does."""
    if isinstance(values, str):
        values = (values,)
    parsed: dict = {}
    for given in values:
        name, _, text = str(given).rpartition(":")
        try:
            parsed[name] = convert(text.strip())
        except ValueError as err:
            raise ValidationError(f"{option} {given!r}: {err}; the syntax is {_SYNTAX}") from None
    return parsed


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number" if text else "no value after the output name") from None
    if math.isnan(value):
        raise ValueError("NaN is no tolerance")
    return value


def _tolerance(text: str) -> float:
    value = _number(text)
    if value < 0:
        raise ValueError(f"{text} is negative: a tolerance is 0 or more")
    return value


def _quantile(text: str) -> float:
    value = _number(text)
    if not 0 <= value <= 1:
        raise ValueError(f"{text} is outside [0, 1]")
    return value


def _stat(text: str) -> str:
    # Polygraphy's cast() strips quotes from a string value.
    stat = text.strip("\"'")
    if stat not in CHECK_ERROR_STATS:
        raise ValueError(f"{stat!r} is no error statistic: use one of {', '.join(CHECK_ERROR_STATS)}")
    return stat
