"""Compare outputs the way Polygraphy's default comparison (SimpleCompareFunc, comparator/compare.py) does, so
that ``hetero validate`` gives the verdict ``polygraphy run --load-outputs`` would give on the same arrays.

Sides: ``got`` is the run under test (the split), ``want`` the reference (the whole-model session, or outputs
loaded from a file). They are Polygraphy's first and second runner: the relative error divides by the
reference, ``|got - want| / |want|``, and ``polygraphy run model --onnxrt --load-outputs ref.json`` compares
the live run (first) against the loaded file (second) in the same way.

Polygraphy's rules, followed even where they look odd (each is what a Polygraphy user would see):
- Shapes must be equal (its default check_shapes); the dtypes need not be: the values are compared after
  NumPy's type promotion. float16 is widened to float32, 8- and 16-bit integers to int32, uint32 to int64;
  uint64 is not widened, so a uint64 output where got < want wraps round to a huge error.
- absdiff = |got - want|; for two bool outputs it is got XOR want. reldiff = absdiff / |want|, where a
  floating-point want of exactly 0 is first raised to 2.2e-16 (so rel errors there are huge); an integer or
  bool want of 0 gives inf (or NaN for 0/0) instead.
- ``elemwise`` (the default) fails where any element exceeds BOTH tolerances (absdiff > atol or NaN, and
  reldiff > rtol or NaN). ``max``, ``mean``, ``median``, ``quantile`` fail when the statistic of absdiff
  exceeds atol (or is NaN) and that of reldiff exceeds rtol (or is NaN).
- NaN anywhere fails (NaN - NaN is NaN), with every statistic, so do matching infinities (inf - inf is
  NaN) unless ``infinities_compare_equal`` (``--infinities-compare-equal``). Polygraphy has no option that
  compares NaNs equal; ``nans_compare_equal`` (hetero tune's check, no option of hetero validate) does.
  The mean is accumulated in float32.
- Empty outputs: max and median are 0 and elemwise passes, but the mean of nothing is NaN, so ``mean``
  FAILS an empty output, and ``quantile`` gives inf and fails it too.

Where this differs from Polygraphy, deliberately: outputs are matched by exact name (Polygraphy falls back to
a fuzzy match by position), and an output of ``want`` missing from ``got`` fails (Polygraphy skips it with a
warning); outputs that cannot be subtracted at all (strings) fail with a reason where Polygraphy would raise.
Where some differences are NaN (which makes every statistic Polygraphy logs NaN), the verdict is Polygraphy's
but the statistics are those of the other elements, and the NaN ones are counted by cause: the same
infinity on both sides, NaN on both sides, NaN on one side only.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .tolerances import OutputTolerance, Tolerances

# Polygraphy's epsilon for a reference value of 0 in the relative error (float64 machine epsilon).
_EPSILON = 2.220446049250313e-16
# OutputComparison's statistics, in its order.
_STATISTICS = (
    "max_abs", "mean_abs", "median_abs", "max_rel", "mean_rel", "median_rel", "quantile_abs", "quantile_rel",
)  # fmt: skip
# Why an empty output fails: Polygraphy's statistics of nothing.
_EMPTY_NOTES = {
    "mean": " (the mean of an empty output is NaN, which Polygraphy fails)",
    "quantile": " (the quantile of an empty output is inf, which Polygraphy fails)",
}


@dataclass(frozen=True)
class OutputComparison:
    """One output of one run compared against the reference.

    ``passed`` is Polygraphy's verdict; ``reason`` says in one line why it failed ("" when it passed). The
    error statistics are those Polygraphy logs (absolute ``*_abs`` and relative ``*_rel``; the quantile ones
    only when the statistic checked is ``quantile``), of the elements whose absolute difference is a number:
    where some are NaN, Polygraphy's would all be NaN, and those elements are counted instead:
    ``same_infinities`` (the same infinity on both sides, without infinities_compare_equal),
    ``same_nans`` (NaN on both sides, without nans_compare_equal), ``one_sided_nans`` (NaN on one side
    only). ``only_matching`` is True where the output failed only because of same_infinities and
    same_nans: the split gives what the reference gives, and compared as equal they pass. The statistics
    are None where no values were compared as numbers (an output missing, shapes that differ, values that
    cannot be subtracted, every difference NaN). ``worst_index`` is the index of the largest absolute error
    (the first NaN on one side only, if any), None for an empty output or none compared.
    ``got_shape``/``got_dtype`` are None when ``got`` has no such output."""

    name: str
    passed: bool
    got_shape: tuple[int, ...] | None
    want_shape: tuple[int, ...]
    got_dtype: str | None
    want_dtype: str
    tolerance: OutputTolerance
    max_abs: float | None = None
    mean_abs: float | None = None
    median_abs: float | None = None
    max_rel: float | None = None
    mean_rel: float | None = None
    median_rel: float | None = None
    quantile_abs: float | None = None
    quantile_rel: float | None = None
    worst_index: tuple[int, ...] | None = None
    reason: str = ""
    same_infinities: int = 0
    same_nans: int = 0
    one_sided_nans: int = 0
    only_matching: bool = False


def compare_outputs(
    got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray], tolerances: Tolerances
) -> list[OutputComparison]:
    """Compare every output of ``want`` (the reference), in its order, with the output of the same name in
    ``got`` under ``tolerances.of(name)`` (and its infinities_compare_equal and nans_compare_equal); an
    output missing from ``got`` fails. Outputs only in ``got`` are ignored, as Polygraphy ignores them."""
    results = []
    for name, reference in want.items():
        tolerance = tolerances.of(name)
        if name in got:
            results.append(
                compare_output(
                    name,
                    got[name],
                    reference,
                    tolerance,
                    tolerances.infinities_compare_equal,
                    nans_compare_equal=tolerances.nans_compare_equal,
                )
            )
        else:
            reference = np.asarray(reference)
            results.append(
                OutputComparison(
                    name,
                    False,
                    None,
                    tuple(reference.shape),
                    None,
                    str(reference.dtype),
                    tolerance,
                    reason="missing from the results under test",
                )
            )
    return results


def compare_output(
    name: str,
    got: np.ndarray,
    want: np.ndarray,
    tolerance: OutputTolerance,
    infinities_compare_equal: bool = False,
    *,
    nans_compare_equal: bool = False,
) -> OutputComparison:
    """Compare one output ``got`` against the reference ``want`` under ``tolerance``, as Polygraphy's
    SimpleCompareFunc compares its first runner's output against its second's (see the module docstring);
    ``infinities_compare_equal``: Polygraphy's, the same infinity on both sides is a difference of 0;
    ``nans_compare_equal``: so is NaN on both sides (no Polygraphy option). The verdict and statistics in an
    OutputComparison."""
    got, want = np.asarray(got), np.asarray(want)
    sides = dict(
        name=name,
        got_shape=tuple(got.shape),
        want_shape=tuple(want.shape),
        got_dtype=str(got.dtype),
        want_dtype=str(want.dtype),
        tolerance=tolerance,
    )
    if got.shape != want.shape:
        return OutputComparison(
            passed=False, reason=f"shapes differ: {got.shape} here, {want.shape} in the reference", **sides
        )
    with np.errstate(all="ignore"):
        try:
            absdiff, reldiff = _differences(got, want, infinities_compare_equal)
        except TypeError as err:
            reason = f"values of {got.dtype} and {want.dtype} cannot be compared ({err})"
            return OutputComparison(passed=False, reason=reason, **sides)
        nan = _NanDifferences.of(got, want, absdiff)
        if nans_compare_equal and nan.same_nan.any():
            absdiff, reldiff = nan.as_equal(absdiff, nan.same_nan), nan.as_equal(reldiff, nan.same_nan)
            nan = _NanDifferences.of(got, want, absdiff)
        try:
            stats = _statistics(absdiff, reldiff, tolerance, nan.numeric)
            passed, reason = _verdict(absdiff, reldiff, stats, tolerance, nan)
        except TypeError as err:  # np.quantile of bools: Polygraphy raises there
            reason = (
                f"the {tolerance.check_error_stat} error of {got.dtype} values cannot be computed ({err})"
            )
            return OutputComparison(passed=False, reason=reason, **sides)
        only_matching = not passed and nan.only_matching(absdiff, reldiff, tolerance)
    if only_matching:
        reason += "; the other elements are within tolerance" if nan.numeric.any() else ""
    return OutputComparison(
        passed=passed,
        worst_index=nan.worst(absdiff),
        reason=reason,
        same_infinities=int(np.count_nonzero(nan.same_inf)),
        same_nans=int(np.count_nonzero(nan.same_nan)),
        one_sided_nans=int(np.count_nonzero(nan.one_sided)),
        only_matching=only_matching,
        **sides,
        **stats,
    )


@dataclass(frozen=True)
class _NanDifferences:
    """Where an output's absolute difference is NaN, by cause (boolean masks of its shape): ``same_inf``
    the same infinity on both sides (inf - inf), ``same_nan`` NaN on both sides, ``one_sided`` NaN on one
    side only; ``numeric``: every other element (its difference a number); ``infinities``: the infinities
    in same_inf, for a message (``-inf``, ``inf`` or ``inf and -inf``)."""

    same_inf: np.ndarray
    same_nan: np.ndarray
    one_sided: np.ndarray
    numeric: np.ndarray
    infinities: str

    @classmethod
    def of(cls, got: np.ndarray, want: np.ndarray, absdiff: np.ndarray) -> _NanDifferences:
        """The masks for ``absdiff`` = |got - want| (XOR for booleans, which are never NaN)."""
        none = np.zeros(absdiff.shape, dtype=bool)
        nan = np.isnan(absdiff) if absdiff.dtype.kind in "fc" else none
        if not nan.any():
            return cls(none, none, none, ~none, "")
        same_inf, same_nan = none, none
        if got.dtype.kind in "fc" and want.dtype.kind in "fc":
            same_inf = nan & np.isinf(got) & (got == want)
            same_nan = nan & np.isnan(got) & np.isnan(want)
        signs = {"-inf" if v < 0 else "inf" for v in np.real(got[same_inf])}
        infinities = " and ".join(sign for sign in ("inf", "-inf") if sign in signs)
        return cls(same_inf, same_nan, nan & ~same_inf & ~same_nan, ~nan, infinities)

    @staticmethod
    def as_equal(diff: np.ndarray, where: np.ndarray) -> np.ndarray:
        """``diff`` with a difference of 0 ``where`` the mask holds."""
        return np.where(where, diff.dtype.type(0), diff)

    def only_matching(self, absdiff: np.ndarray, reldiff: np.ndarray, tolerance: OutputTolerance) -> bool:
        """Whether the output would pass with same_inf and same_nan compared as equal (nothing else NaN)."""
        matching = self.same_inf | self.same_nan
        if self.one_sided.any() or not matching.any():
            return False
        absdiff, reldiff = self.as_equal(absdiff, matching), self.as_equal(reldiff, matching)
        stats = _statistics(absdiff, reldiff, tolerance, None)
        return _verdict(absdiff, reldiff, stats, tolerance, None)[0]

    def worst(self, absdiff: np.ndarray) -> tuple[int, ...] | None:
        """The index of the largest absolute difference: the first NaN on one side only if any, else the
        largest number, else (every difference 0 or a matching infinity or NaN) the first matching one."""
        if not absdiff.size:
            return None
        matching = self.same_inf | self.same_nan
        score = self.as_equal(absdiff, matching) if matching.any() else absdiff
        flat = int(np.argmax(score))
        if matching.any() and not score.flat[flat]:
            flat = int(np.argmax(matching))
        return tuple(int(i) for i in np.unravel_index(flat, absdiff.shape))

    def notes(self) -> list[str]:
        """What the NaN differences are, one phrase per cause."""
        parts = []
        for mask, what in (
            (
                self.same_inf,
                f"{self.infinities} on both sides, which Polygraphy counts as NaN differences (inf - inf): "
                "--infinities-compare-equal compares them as equal",
            ),
            (self.same_nan, "NaN on both sides, which Polygraphy fails (it fails every NaN)"),
            (self.one_sided, "NaN on one side only"),
        ):
            count = int(np.count_nonzero(mask))
            if count:
                parts.append(f"{count} element{' is' if count == 1 else 's are'} {what}")
        return parts


def _cast_up(array: np.ndarray) -> np.ndarray:
    """Polygraphy's comparator.util.cast_up: widen float16 and narrow integers before arithmetic."""
    if array.dtype == np.float16:
        return array.astype(np.float32)
    if array.dtype in (np.int8, np.uint8, np.int16, np.uint16):
        return array.astype(np.int32)
    if array.dtype == np.uint32:
        return array.astype(np.int64)
    return array


def _differences(
    got: np.ndarray, want: np.ndarray, infinities_compare_equal: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(absdiff, reldiff) as SimpleCompareFunc._check_outputs_match computes them; TypeError where the
    values cannot be subtracted or divided."""
    if got.dtype == np.bool_ and want.dtype == np.bool_:
        absdiff = np.logical_xor(got, want)
    else:
        absdiff = np.array(np.abs(np.array(_cast_up(got) - _cast_up(want))))
        if infinities_compare_equal:
            absdiff = np.where(np.logical_and(np.isinf(got), got == want), np.array(0), absdiff)
    divisor = copy.copy(_cast_up(want))
    if np.issubdtype(divisor.dtype, np.floating):
        divisor[divisor == 0] += _EPSILON
    reldiff = absdiff / np.array(np.abs(divisor))
    return absdiff, reldiff


def _higher_precision(reduce, array: np.ndarray) -> float:
    # Polygraphy's use_higher_precision: 0 for an empty array, else reduce the widened array.
    return 0.0 if array.size == 0 else float(reduce(_cast_up(array)))


def _quantile(array: np.ndarray, q: float) -> float:
    return float(np.inf) if array.size == 0 else float(np.quantile(array, q))


def _statistics(
    absdiff: np.ndarray, reldiff: np.ndarray, tolerance: OutputTolerance, numeric: np.ndarray | None
) -> dict[str, float | None]:
    """The error statistics Polygraphy records (OutputCompareResult), as Python floats, of the elements
    ``numeric`` marks (every element where it is None or marks all; None each where it marks none of a
    non-empty output)."""
    if numeric is not None and not numeric.all():
        if not numeric.any():
            return dict.fromkeys(_STATISTICS)
        absdiff, reldiff = absdiff[numeric], reldiff[numeric]
    stats: dict[str, float | None] = {}
    for side, diff in (("abs", absdiff), ("rel", reldiff)):
        stats[f"max_{side}"] = _higher_precision(lambda a: np.amax(a).item(), diff)
        # np.mean of nothing is NaN (with a warning, spared here)
        stats[f"mean_{side}"] = float(np.mean(diff, dtype=np.float32)) if diff.size else float("nan")
        stats[f"median_{side}"] = _higher_precision(np.median, diff)
        stats[f"quantile_{side}"] = (
            _quantile(diff, tolerance.error_quantile) if tolerance.check_error_stat == "quantile" else None
        )
    return stats


def _stat_failed(value: float, tol: float) -> bool:
    # Polygraphy's _simple_stat_failed.
    return bool(np.isnan(value)) or value > tol


def _verdict(
    absdiff: np.ndarray,
    reldiff: np.ndarray,
    stats: Mapping[str, float | None],
    tolerance: OutputTolerance,
    nan: _NanDifferences | None,
) -> tuple[bool, str]:
    """(passed, reason) for the statistic ``tolerance`` checks: Polygraphy's verdict on the whole arrays
    (a NaN difference fails every statistic), the reason naming the numbers over the tolerance and the NaN
    differences by cause (``nan``; None where there are none)."""
    atol, rtol, stat = tolerance.atol, tolerance.rtol, tolerance.check_error_stat
    notes = nan.notes() if nan is not None else []
    if stat == "elemwise":
        # Polygraphy's util.array turns a number beside an array into a 0-d array, which NumPy does not treat
        # as a weak scalar: float32 errors are compared with the float64 tolerance, the 0 above is int64.
        mismatches = (np.greater(absdiff, np.array(atol)) | np.isnan(absdiff)) & (
            np.greater(reldiff, np.array(rtol)) | np.isnan(reldiff)
        )
        if not mismatches.any():
            return True, ""
        numbers = int(np.count_nonzero(mismatches if nan is None else mismatches & nan.numeric))
        if numbers:
            notes.insert(
                0,
                f"{numbers} of {absdiff.size} elements differ by more than atol={atol:g} and rtol={rtol:g}; "
                f"max abs error {stats['max_abs']:.5g}, max rel error {stats['max_rel']:.5g}",
            )
        return False, "; ".join(notes)
    abs_value, rel_value = stats[f"{stat}_abs"], stats[f"{stat}_rel"]
    over = abs_value is not None and rel_value is not None
    over = over and _stat_failed(abs_value, atol) and _stat_failed(rel_value, rtol)
    if not over and not notes:
        return True, ""
    if over:
        extra = _EMPTY_NOTES.get(stat, "") if absdiff.size == 0 else ""
        notes.insert(
            0,
            f"{stat} abs error {abs_value:.5g} > atol={atol:g} and {stat} rel error {rel_value:.5g} > "
            f"rtol={rtol:g}{extra}",
        )
    return False, "; ".join(notes)
