"""hetero validate's tolerances and comparison (hetero_cli.app.validate.tolerances, .compare) against the real
Polygraphy: the same option strings must resolve to the same per-output tolerances as Polygraphy's parser,
and the same arrays must get the same verdict and error statistics as its SimpleCompareFunc."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from polygraphy import util as pg_util
from polygraphy.comparator import IterationResult, SimpleCompareFunc
from polygraphy.logger import G_LOGGER
from polygraphy.tools.args import util as args_util

from hetero_cli.app.validate.compare import OutputComparison, compare_output, compare_outputs
from hetero_cli.app.validate.tolerances import CHECK_ERROR_STATS, OutputTolerance, Tolerances
from hetero_cli.errors import ValidationError

G_LOGGER.module_severity = G_LOGGER.CRITICAL

DTYPES = ["float32", "float16", "float64", "int64", "int32", "int8", "uint8", "uint32", "uint64", "bool"]
SPECIAL = [0.0, 1.0, -1.0, 1e-6, 1e3, math.nan, math.inf, -math.inf]
NOISE = [0.0, 0.0, 0.0, 1e-7, 1e-5, 1e-3, 0.5]
TOLERANCES = [0.0, 1e-5, 1e-3, 0.1, 1.0, math.inf]


def polygraphy_result(got, want, *, atol, rtol, stat, quantile=0.99, infinities_compare_equal=False):
    """Polygraphy's own verdict: its default comparison of a first runner's ``got`` against ``want``."""
    func = SimpleCompareFunc(
        atol=atol,
        rtol=rtol,
        check_error_stat=stat,
        error_quantile=quantile,
        infinities_compare_equal=infinities_compare_equal,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = func(
            IterationResult({"o": got}, runner_name="split"),
            IterationResult({"o": want}, runner_name="whole"),
        )
    return results["o"]


def assert_same_as_polygraphy(ours: OutputComparison, theirs, numeric=False) -> None:
    """Polygraphy's verdict, and its statistics; where some differences are NaN (Polygraphy's statistics
    all NaN then), those of the elements whose difference is a number: ``numeric``, Polygraphy's result on
    them alone (None where there are none), checked where given (False: not given)."""
    assert ours.passed == bool(theirs), ours.reason
    assert ours.passed == (ours.reason == "")
    if theirs is False:  # shapes differ: Polygraphy returns a bare False and computes nothing
        assert ours.max_abs is None
        return
    nan_differences = ours.same_infinities + ours.same_nans + ours.one_sided_nans
    assert math.isnan(theirs.max_absdiff) == bool(nan_differences)
    if nan_differences:
        assert not ours.passed and not (ours.only_matching and ours.one_sided_nans)
        if numeric is False:
            return
        if numeric is None:
            assert ours.max_abs is None and ours.mean_rel is None
            return
        theirs = numeric
    for mine, polygraphy in [
        ("max_abs", "max_absdiff"),
        ("mean_abs", "mean_absdiff"),
        ("median_abs", "median_absdiff"),
        ("max_rel", "max_reldiff"),
        ("mean_rel", "mean_reldiff"),
        ("median_rel", "median_reldiff"),
        ("quantile_abs", "quantile_absdiff"),
        ("quantile_rel", "quantile_reldiff"),
    ]:
        np.testing.assert_equal(getattr(ours, mine), getattr(theirs, polygraphy), err_msg=mine)


def _array(draw, dtype: str, shape) -> np.ndarray:
    """An array of ``dtype``: small integers, booleans, or floats with zeros, NaN and infinities."""
    if dtype == "bool":
        return draw(hnp.arrays(np.bool_, shape))
    if np.dtype(dtype).kind in "iu":
        low = 0 if np.dtype(dtype).kind == "u" else -5
        return draw(hnp.arrays(np.int64, shape, elements=st.integers(low, 6))).astype(dtype)
    values = st.one_of(st.sampled_from(SPECIAL), st.floats(-10, 10))
    with np.errstate(all="ignore"):
        return draw(hnp.arrays(np.float64, shape, elements=values)).astype(dtype)


def _numeric(got: np.ndarray, want: np.ndarray, infinities_equal: bool) -> np.ndarray:
    """Where Polygraphy's absolute difference is a number, not NaN: neither side NaN, nor (unless
    ``infinities_equal``) the same infinity on both."""

    def inexact(a: np.ndarray) -> bool:
        return a.dtype.kind in "fc"

    nan = np.zeros(np.broadcast_shapes(got.shape, want.shape), dtype=bool)
    for side in (got, want):
        if inexact(side):
            nan = nan | np.isnan(side)
    if inexact(got) and inexact(want) and not infinities_equal:
        nan = nan | (np.isinf(got) & (got == want))
    return ~nan


@st.composite
def output_pairs(draw):
    """(got, want): mostly same shape and dtype, ``got`` often ``want`` plus small noise."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    want_dtype = draw(st.sampled_from(DTYPES))
    got_dtype = draw(st.sampled_from([want_dtype] * 4 + DTYPES))
    want = _array(draw, want_dtype, shape)
    if draw(st.integers(0, 9)) == 0:
        got = _array(draw, got_dtype, draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)))
    elif np.dtype(got_dtype).kind == "f" and draw(st.booleans()):
        noise = draw(hnp.arrays(np.float64, shape, elements=st.sampled_from(NOISE)))
        with np.errstate(all="ignore"):
            got = (want.astype(np.float64) + noise).astype(got_dtype)
    elif got_dtype == want_dtype and draw(st.booleans()):
        got = want.copy()
    else:
        got = _array(draw, got_dtype, shape)
    return got, want


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(
    output_pairs(),
    st.sampled_from(TOLERANCES),
    st.sampled_from(TOLERANCES),
    st.sampled_from(CHECK_ERROR_STATS),
    st.sampled_from([0.0, 0.5, 0.9, 1.0]),
    st.booleans(),
)
def test_verdict_and_statistics_are_polygraphys(pair, atol, rtol, stat, quantile, infinities_equal):
    got, want = pair
    tolerance = OutputTolerance(atol, rtol, stat, quantile)
    options = dict(
        atol=atol, rtol=rtol, stat=stat, quantile=quantile, infinities_compare_equal=infinities_equal
    )
    try:
        theirs = polygraphy_result(got, want, **options)
    except TypeError:  # values Polygraphy cannot compare (isinf or quantile of bools): ours fails them
        ours = compare_output("o", got, want, tolerance, infinities_equal)
        assert not ours.passed and "cannot be c" in ours.reason
        return
    ours = compare_output("o", got, want, tolerance, infinities_equal)
    numeric = _numeric(got, want, infinities_equal) if got.shape == want.shape else None
    subset = None
    if numeric is not None and numeric.any():
        subset = polygraphy_result(got[numeric], want[numeric], **options)
    assert_same_as_polygraphy(ours, theirs, subset)
    assert ours.tolerance == tolerance
    assert (ours.got_shape, ours.want_shape) == (got.shape, want.shape)
    assert (ours.got_dtype, ours.want_dtype) == (str(got.dtype), str(want.dtype))


@pytest.mark.parametrize(
    ("got", "want", "stat", "passed", "reason"),
    [
        # elemwise fails only where an element is beyond BOTH tolerances: 1.0 vs 1.5 is within rtol 0.5.
        ([1.0, 100.0], [1.5, 100.0], "elemwise", True, ""),
        ([1.0, 0.0], [1.5, 1.0], "elemwise", False, "1 of 2 elements differ"),
        # float32(0.1) is a little over 0.1: Polygraphy compares with the float64 atol, so this fails
        ([0.1], [0.0], "elemwise", False, "1 of 1 elements differ"),
        # the mean of nothing is NaN, and Polygraphy fails NaN
        ([], [], "mean", False, "mean of an empty output is NaN"),
        ([], [], "max", True, ""),
        ([], [], "elemwise", True, ""),
        ([], [], "quantile", False, "quantile of an empty output is inf"),
        # NaN never matches, not even NaN
        ([math.nan], [math.nan], "elemwise", False, "1 element is NaN on both sides"),
        ([math.nan, 1.0], [math.nan, 1.0], "median", False, "1 element is NaN on both sides"),
        ([math.inf, 1.0], [math.inf, 1.0], "max", False, "1 element is inf on both sides"),
    ],
)
def test_polygraphys_edge_cases(got, want, stat, passed, reason):
    got, want = np.array(got, np.float32), np.array(want, np.float32)
    tolerance = OutputTolerance(atol=0.1, rtol=0.5, check_error_stat=stat)
    ours = compare_output("o", got, want, tolerance)
    assert_same_as_polygraphy(ours, polygraphy_result(got, want, atol=0.1, rtol=0.5, stat=stat))
    assert ours.passed is passed
    assert reason in ours.reason


def test_the_same_infinities_and_nans_on_both_sides_are_counted_and_the_others_measured():
    want = np.array([[-np.inf, 1.0], [np.nan, 2.0]], np.float32)
    got = want + np.array([[0, 2**-20], [0, 0]], np.float32)
    ours = compare_output("o", got, want, OutputTolerance())
    assert not ours.passed and ours.only_matching
    assert (ours.same_infinities, ours.same_nans, ours.one_sided_nans) == (1, 1, 0)
    assert ours.max_abs == 2**-20 and ours.median_abs is not None and ours.mean_rel is not None
    assert ours.worst_index == (0, 1)
    assert ours.reason == (
        "1 element is -inf on both sides, which Polygraphy counts as NaN differences (inf - inf): "
        "--infinities-compare-equal compares them as equal; 1 element is NaN on both sides, which "
        "Polygraphy fails (it fails every NaN); the other elements are within tolerance"
    )
    # Polygraphy's flag takes the infinities out; the NaN still fails, as in Polygraphy
    flagged = compare_output("o", got, want, OutputTolerance(), True)
    assert not flagged.passed and (flagged.same_infinities, flagged.same_nans) == (0, 1)
    assert (
        bool(
            polygraphy_result(got, want, atol=1e-5, rtol=1e-5, stat="elemwise", infinities_compare_equal=True)
        )
        is False
    )
    both = compare_output("o", got, want, OutputTolerance(), True, nans_compare_equal=True)
    assert both.passed and both.reason == "" and both.max_abs == 2**-20
    everywhere = compare_outputs(
        {"o": got}, {"o": want}, Tolerances(infinities_compare_equal=True, nans_compare_equal=True)
    )
    assert everywhere[0].passed


@pytest.mark.parametrize("stat", CHECK_ERROR_STATS)
def test_only_matching_says_whether_the_output_passes_with_them_equal(stat):
    want = np.array([-np.inf, 1.0, 2.0, np.inf], np.float32)
    close = compare_output("o", want.copy(), want, OutputTolerance(check_error_stat=stat))
    assert not close.passed and close.only_matching and close.same_infinities == 2
    assert close.reason.startswith("2 elements are inf and -inf on both sides")
    far = compare_output("o", want + np.float32(1), want, OutputTolerance(check_error_stat=stat))
    assert not far.passed and not far.only_matching and far.same_infinities == 2
    assert "atol=1e-05" in far.reason and "inf and -inf on both sides" in far.reason
    one_sided = compare_output(
        "o",
        np.array([np.nan, 1.0], np.float32),
        np.array([0.0, 1.0], np.float32),
        OutputTolerance(check_error_stat=stat),
    )
    assert not one_sided.passed and not one_sided.only_matching
    assert one_sided.one_sided_nans == 1 and "1 element is NaN on one side only" in one_sided.reason
    assert one_sided.worst_index == (0,) and one_sided.max_abs == 0.0


def test_every_difference_nan_leaves_no_statistics():
    want = np.array([np.nan, -np.inf], np.float64)
    ours = compare_output("o", want.copy(), want, OutputTolerance())
    assert ours.only_matching and ours.max_abs is None and ours.median_rel is None
    assert ours.worst_index == (0,)
    assert not ours.reason.endswith("within tolerance")


def test_nans_compare_equal_has_no_polygraphy_option():
    tolerances = Tolerances.parse(infinities_compare_equal=True, nans_compare_equal=True)
    assert tolerances.polygraphy_args() == [
        "--atol",
        "1e-05",
        "--rtol",
        "1e-05",
        "--infinities-compare-equal",
    ]


def test_reference_is_the_divisor_and_worst_index_points_at_the_largest_error():
    got = np.array([[1.0, 2.0], [3.0, 10.0]], np.float32)
    want = np.array([[1.0, 2.0], [3.0, 5.0]], np.float32)
    ours = compare_output("o", got, want, OutputTolerance())
    assert ours.max_rel == pytest.approx(1.0)  # |10 - 5| / |5|, not / |10|
    assert ours.worst_index == (1, 1)
    assert compare_output("o", got[0, 0], want[0, 0], OutputTolerance()).worst_index == ()
    assert compare_output("o", got[:0], want[:0], OutputTolerance()).worst_index is None


def test_shapes_differ_fails_with_both_shapes():
    ours = compare_output("logits", np.zeros((1, 10)), np.zeros((1, 11)), OutputTolerance())
    assert not ours.passed
    assert ours.reason == "shapes differ: (1, 10) here, (1, 11) in the reference"


def test_strings_cannot_be_compared_and_fail_with_a_reason():
    ours = compare_output("o", np.array(["a"]), np.array(["a"]), OutputTolerance())
    assert not ours.passed and "cannot be compared" in ours.reason


def test_compare_outputs_goes_over_want_in_order_and_fails_a_missing_output():
    want = {"b": np.ones(3, np.float32), "a": np.zeros(2, np.int64), "c": np.ones(1, np.float32)}
    got = {"a": np.zeros(2, np.int64), "b": np.ones(3, np.float32) + 0.01, "extra": np.ones(1)}
    tolerances = Tolerances.parse(atol=["1e-5", "b:0.1"])
    results = compare_outputs(got, want, tolerances)
    assert [r.name for r in results] == ["b", "a", "c"]
    assert [r.passed for r in results] == [True, True, False]
    assert results[0].tolerance.atol == 0.1 and results[1].tolerance.atol == 1e-5
    missing = results[2]
    assert missing.reason == "missing from the results under test"
    assert (missing.got_shape, missing.got_dtype, missing.want_shape) == (None, None, (1,))


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(output_pairs(), output_pairs(), st.data())
def test_per_output_options_give_polygraphys_verdicts(first, second, data):
    """The option strings as a user types them, through our parser and Polygraphy's own, on two outputs."""
    names = ["x", "a:b"]
    option = st.lists(
        st.tuples(st.sampled_from(["", "x:", "a:b:"]), st.sampled_from(["0", "1e-5", "0.1", "1", "inf"])),
        max_size=3,
    ).map(lambda pairs: [name + value for name, value in pairs])
    atol, rtol = data.draw(option), data.draw(option)
    stats = data.draw(
        st.lists(
            st.tuples(st.sampled_from(["", "x:", "a:b:"]), st.sampled_from(CHECK_ERROR_STATS)), max_size=3
        )
    )
    stat_args = [name + stat for name, stat in stats]
    tolerances = Tolerances.parse(atol=atol, rtol=rtol, check_error_stat=stat_args)
    got = {"x": first[0], "a:b": second[0]}
    want = {"x": first[1], "a:b": second[1]}
    func = SimpleCompareFunc(
        atol=args_util.parse_arglist_to_dict(atol or None),
        rtol=args_util.parse_arglist_to_dict(rtol or None),
        check_error_stat=args_util.parse_arglist_to_dict(stat_args or None),
    )
    results = compare_outputs(got, want, tolerances)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            theirs = func(
                IterationResult(got, runner_name="split"), IterationResult(want, runner_name="whole")
            )
        except (
            TypeError
        ):  # Polygraphy gives up on values it cannot compare (quantile of bools): ours fails them
            assert any(not ours.passed and "cannot be c" in ours.reason for ours in results)
            return
    for ours in results:
        assert_same_as_polygraphy(ours, theirs[ours.name])
    assert tolerances.unknown_outputs(names) == []


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "logits", "a:b", "out:0", ":"]),
            st.sampled_from(["1e-3", "0", "2", "1e-5", "inf", " 0.5 "]),
        ),
        max_size=5,
    )
)
def test_parse_resolves_each_output_as_polygraphy_does(pairs):
    args = [name + (":" if name else "") + value for name, value in pairs]
    theirs = args_util.parse_arglist_to_dict(args or None)
    tolerances = Tolerances.parse(atol=args, rtol=args)
    for name in ["logits", "a:b", "out:0", ":", "other"]:
        want = float(pg_util.value_or_from_dict(theirs, name, 1e-5)) if theirs else 1e-5
        assert tolerances.of(name).atol == want
        assert tolerances.of(name).rtol == want


def test_parse_defaults_are_polygraphys():
    assert Tolerances.parse().of("anything") == OutputTolerance(1e-5, 1e-5, "elemwise", 0.99)
    func = SimpleCompareFunc()
    assert (func.atol, func.rtol, func.check_error_stat, func.error_quantile) == (
        1e-5,
        1e-5,
        "elemwise",
        0.99,
    )


def test_parse_per_output_default_and_last_wins():
    tolerances = Tolerances.parse(
        atol=["1e-5", "logits:1e-3", "logits:1e-2"],
        rtol=["0.1", "1e-4"],
        check_error_stat=["max", "probs:median"],
        error_quantile=["probs:0.5"],
    )
    assert tolerances.of("logits") == OutputTolerance(1e-2, 1e-4, "max", 0.99)
    assert tolerances.of("probs") == OutputTolerance(1e-5, 1e-4, "median", 0.5)
    assert tolerances.of("other") == OutputTolerance(1e-5, 1e-4, "max", 0.99)


def test_an_output_name_with_colons_splits_on_the_last_one():
    tolerances = Tolerances.parse(atol=["encoder:layer:0:1e-3"], check_error_stat=["a:b:'mean'"])
    assert tolerances.of("encoder:layer:0").atol == 1e-3
    assert tolerances.of("a:b").check_error_stat == "mean"
    assert tolerances.unknown_outputs(["encoder:layer:0"]) == ["a:b"]


def test_unknown_outputs_lists_names_not_in_the_model_in_order():
    tolerances = Tolerances.parse(atol=["zeta:1", "logits:1"], rtol=["alpha:1", "zeta:2"])
    assert tolerances.unknown_outputs(["logits"]) == ["zeta", "alpha"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"atol": ["abc"]}, "--atol 'abc': 'abc' is not a number; the syntax is [<output>:]<value>"),
        ({"atol": ["logits:"]}, "--atol 'logits:': no value after the output name"),
        ({"rtol": ["-1e-3"]}, "--rtol '-1e-3': -1e-3 is negative"),
        ({"rtol": ["x:nan"]}, "NaN is no tolerance"),
        ({"rtol": ["[1,2]"]}, "'[1,2]' is not a number"),
        (
            {"check_error_stat": ["x:maximum"]},
            "'maximum' is no error statistic: use one of max, mean, median",
        ),
        ({"check_error_stat": ["MAX"]}, "'MAX' is no error statistic"),
        ({"error_quantile": ["1.5"]}, "--error-quantile '1.5': 1.5 is outside [0, 1]"),
    ],
)
def test_parse_refuses_bad_values_with_the_syntax(kwargs, message):
    with pytest.raises(ValidationError) as caught:
        Tolerances.parse(**kwargs)
    assert message in str(caught.value)
    assert "[<output>:]<value>" in str(caught.value)


def reparse(args: list[str]) -> Tolerances:
    """Tolerances.parse of `polygraphy run` options as argparse would group them."""
    options: dict[str, list[str]] = {}
    flag = False
    for arg in args:
        if arg == "--infinities-compare-equal":
            flag = True
        elif arg.startswith("--"):
            current = options.setdefault(arg[2:].replace("-", "_"), [])
        else:
            current.append(arg)
    return Tolerances.parse(**options, infinities_compare_equal=flag)


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(
    st.lists(st.sampled_from(["1e-3", "0", "x:0.1", "a:b:1e-7", "inf", "x:3"]), max_size=3),
    st.lists(st.sampled_from(["1e-3", "y:0.5", "2"]), max_size=2),
    st.lists(st.sampled_from(["max", "x:median", "quantile"]), max_size=2),
    st.lists(st.sampled_from(["0.5", "x:1"]), max_size=2),
    st.booleans(),
)
def test_polygraphy_args_read_back_equal(atol, rtol, stats, quantiles, flag):
    tolerances = Tolerances.parse(atol, rtol, stats, quantiles, infinities_compare_equal=flag)
    assert reparse(tolerances.polygraphy_args()) == tolerances


def test_polygraphy_args_and_describe():
    tolerances = Tolerances.parse(atol=["logits:1e-3"], check_error_stat=["probs:quantile"])
    assert tolerances.polygraphy_args() == [
        "--atol", "1e-05", "logits:0.001", "--rtol", "1e-05", "--check-error-stat", "elemwise", "probs:quantile",
    ]  # fmt: skip
    assert Tolerances.parse().polygraphy_args() == ["--atol", "1e-05", "--rtol", "1e-05"]
    assert tolerances.of("logits").describe() == "elemwise error, atol 0.001, rtol 1e-05"
    assert tolerances.of("probs").describe() == "quantile 0.99 error, atol 1e-05, rtol 1e-05"
