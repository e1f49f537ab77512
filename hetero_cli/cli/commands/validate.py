"""``hetero validate``: the split against one whole-model ONNX Runtime session on the same inputs, every output
compared with Polygraphy's tolerances, the first subgraph that differs named; ends with ``PASSED`` or
``FAILED`` (exit 0 / 1). A thin layer over app.validate.validate_model."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from ...app.validate import (
    Localisation,
    OutputComparison,
    Tolerances,
    ValidationReport,
    check_inputs,
    check_random_inputs,
    check_reference,
    input_shapes,
    polygraphy_json,
    validate_model,
)
from ...errors import DeviceError, ValidationError
from ...placement import device_string
from ..files import check_writable, same_file
from ..options import int_range_option, int_ranges, named, shared, shared_options
from ..output import console, info, new_table
from ..runner import CONTEXT, written
from ..setup import prepare, report_dots, start_running
from ..tolerance_lists import ToleranceListsCommand, check_outputs

#: How validate takes inputs it cannot make random data for (validate has no -i)
_GIVE_INPUTS = (
    "validate makes random data of numbers and booleans only, so give the inputs in a Polygraphy inputs file "
    "with --load-inputs FILE.json (polygraphy run --save-inputs or polygraphy data merge writes one)"
)
#: nodes of a subgraph named in full before "and N more"
SHOWN_NODES = 12


@click.command(
    cls=ToleranceListsCommand,
    context_settings=CONTEXT,
    short_help="Compare the split with one whole-model session: PASSED or FAILED.",
)
@click.option("-m", "model", metavar="MODEL", help="ONNX model (default: models/digits.onnx).")
@click.option("-d", "device", required=True, metavar="DEVICE", help="HETERO:<dev>,<dev>,... or one device.")
@click.option(
    "-shape", "shape", metavar="SHAPE", help="Fill dynamic dimensions: [1,3,96,96] or name[1,3,96,96],..."
)
@click.option(
    "-data_shape", "data_shape", metavar="SHAPE", help="Shape of the data for dynamic inputs (same syntax)."
)
@click.option(
    "--atol",
    multiple=True,
    metavar="[OUT:]V",
    help="Absolute tolerance (default 1e-5); repeatable, per output.",
)
@click.option(
    "--rtol",
    multiple=True,
    metavar="[OUT:]V",
    help="Relative tolerance (default 1e-5); repeatable, per output.",
)
@click.option(
    "--check-error-stat",
    multiple=True,
    metavar="[OUT:]STAT...",
    help="max, mean, median, quantile or elemwise (default: every element), per output as --atol.",
)
@click.option(
    "--error-quantile",
    multiple=True,
    metavar="[OUT:]Q...",
    help="The quantile of --check-error-stat quantile.",
)
@click.option(
    "--infinities-compare-equal",
    is_flag=True,
    help="The same +-inf on both sides is equal (Polygraphy's; without it inf - inf is a NaN difference).",
)
@click.option(
    "--load-inputs",
    metavar="FILE.json",
    callback=named,
    help="Inputs from a Polygraphy inputs file (polygraphy run --save-inputs, data merge).",
)
@click.option(
    "--save-inputs",
    metavar="FILE.json",
    callback=named,
    help="Write the inputs used, as Polygraphy reads them.",
)
@click.option(
    "--save-outputs",
    metavar="FILE.json",
    callback=named,
    help="Write both runs' outputs as Polygraphy RunResults (polygraphy run --load-outputs).",
)
@click.option(
    "--reference",
    default="CPU",
    show_default=True,
    metavar="DEVICE",
    help="The one device that runs the whole model in one session.",
)
@click.option(
    "--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the random inputs."
)
@int_range_option
@click.option("--bisect", is_flag=True, help="On FAILED, narrow the first differing subgraph down to a node.")
@shared_options
def validate(
    model: str | None,
    device: str,
    shape: str | None,
    data_shape: str | None,
    atol: Sequence[str],
    rtol: Sequence[str],
    check_error_stat: Sequence[str],
    error_quantile: Sequence[str],
    infinities_compare_equal: bool,
    load_inputs: str | None,
    save_inputs: str | None,
    save_outputs: str | None,
    reference: str,
    seed: int,
    int_range: Sequence[str],
    bisect: bool,
    **options: Any,
) -> int:
    """Run MODEL split on DEVICE and as one ONNX Runtime session on --reference (CPU) on the same inputs,
    compare every output with Polygraphy's tolerances, and end with PASSED (exit 0) or FAILED (exit 1).

    On FAILED, every tensor between subgraphs is compared with the reference's: the first subgraph that
    differs is named, and --bisect narrows it down to a node. Inputs: seeded random data (-shape or
    -data_shape for dynamic dimensions) or --load-inputs; files in Polygraphy's JSON formats.

    \b
      hetero validate -m model.onnx -d HETERO:OPENVINO,CPU
      hetero validate -m det.onnx -d HETERO:OPENVINO,CPU -data_shape [1,3,96,96] --atol 5e-4 --rtol 1e-3
      hetero validate -m model.onnx -d HETERO:OPENVINO,CPU --atol 0 --rtol 0 --bisect
      hetero validate -m model.onnx -d OPENVINO --atol 1e-5 logits:1e-3 --save-outputs out.json
      polygraphy run model.onnx --onnxrt --load-outputs out.json     # Polygraphy reads what it wrote
    """
    check_writable(save_inputs, "--save-inputs", folder=False)
    check_writable(save_outputs, "--save-outputs", folder=False)
    if save_inputs and save_outputs and same_file(save_inputs, save_outputs):
        raise click.BadParameter(
            f"{save_outputs} is --save-inputs' file too: give the inputs and the outputs a file each",
            param_hint="--save-outputs",
        )
    _check_reference(reference)
    tolerances = Tolerances.parse(
        atol, rtol, check_error_stat, error_quantile, infinities_compare_equal=infinities_compare_equal
    )
    setup = prepare(model, device, **shared(options))  # refuses inputs no data can be fed to first
    setup.check_not_read(save_inputs, "--save-inputs")
    setup.check_not_read(save_outputs, "--save-outputs")
    loaded = polygraphy_json.load_inputs(load_inputs) if load_inputs else None
    m = setup.model
    check_outputs(tolerances, m, "--atol/--rtol/--check-error-stat")
    if loaded is not None:
        if shape or data_shape or int_range:
            raise click.UsageError(
                "-shape, -data_shape and --int-range are for random inputs: leave them out with --load-inputs"
            )
        inputs = [check_inputs(m, feeds, k) for k, feeds in enumerate(loaded)]
        shapes = None
    else:
        inputs = None
        check_random_inputs(m, fix=_GIVE_INPUTS)
        shapes = input_shapes(m, shape, data_shape)
    given, ranges = int_ranges(m, int_range) if loaded is None else ({}, {})
    start_running(setup)
    info(f"Validating {setup.request} against one {reference} session of the whole model")
    for name, text in ranges.items():
        info(f"    {name}: random {text}")
    report = validate_model(
        setup.core,
        m,
        setup.device,
        inputs=inputs,
        shapes=shapes,
        tolerances=tolerances,
        reference=reference,
        seed=seed,
        bisect=bisect,
        int_ranges=given,
    )
    report_dots(report.dot_files, setup.render)
    _print_report(report)
    _save(report, save_inputs, save_outputs)
    if save_inputs and save_outputs:
        check = ["polygraphy", "run", str(setup.model_path), "--onnxrt", "--load-inputs", save_inputs]
        check += ["--load-outputs", save_outputs, *tolerances.polygraphy_args()]
        info(f"Polygraphy compares the same: {shlex.join(check)}")
    click.echo("PASSED" if report.passed else failed_line(report))
    if report.passed:
        return 0
    # FAILED is the command's answer, not an error: the files it wrote stay
    written().keep()
    return 1


def failed_line(report: ValidationReport) -> str:
    """The last line of a failed validation: ``FAILED``, and where only the same infinities or NaNs on
    both sides failed (ValidationReport.only_matching), that said, with what compares them as equal."""
    if not report.only_matching:
        return "FAILED"
    infinities = any(c.same_infinities for c in report.failing)
    nans = any(c.same_nans for c in report.failing)
    what = " and ".join(w for w, on in (("infinities", infinities), ("NaNs", nans)) if on)
    why = ["--infinities-compare-equal compares the infinities as equal"] if infinities else []
    why += ["Polygraphy fails every NaN"] if nans else []
    return f"FAILED: the outputs differ only where both runs give the same {what} ({'; '.join(why)})"


def _check_reference(reference: str) -> None:
    """--reference must be one device (a HETERO string would be a split too): a usage error otherwise."""
    try:
        device_string.parse(reference)
        check_reference(reference)
    except (DeviceError, ValidationError) as exc:
        raise click.BadParameter(str(exc), param_hint="--reference") from None


def _save(report: ValidationReport, save_inputs: str | None, save_outputs: str | None) -> None:
    """--save-inputs and --save-outputs, in Polygraphy's formats; a failure later removes them again."""
    if save_inputs:
        _write(Path(save_inputs), lambda: polygraphy_json.save_inputs(save_inputs, report.inputs))
    if save_outputs:
        runs = {
            runner_name(report.device, split=True): report.outputs,
            runner_name(report.reference, split=False): report.reference_outputs,
        }
        _write(Path(save_outputs), lambda: polygraphy_json.save_outputs(save_outputs, runs))


def runner_name(device: str, *, split: bool) -> str:
    """The runner's name in --save-outputs: ``hetero[HETERO:OPENVINO,CPU]`` for the split,
    ``onnxrt[CPU]`` for the reference (Polygraphy names its runners ``onnxrt-runner-N``)."""
    return f"hetero[{device}]" if split else f"onnxrt[{device}]"


def _write(path: Path, save: Any) -> None:
    written().before_writing(path, folder=False)
    save()
    written().wrote(path)
    info(f"Wrote {path}")


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _verdict(c: OutputComparison) -> str:
    """``passed``, ``FAILED``, or ``FAILED: same inf`` / ``same NaN`` / ``same inf, NaN`` where only the
    same infinities or NaNs on both sides failed it."""
    if c.passed:
        return "passed"
    if not c.only_matching:
        return "FAILED"
    same = [w for w, n in (("inf", c.same_infinities), ("NaN", c.same_nans)) if n]
    return f"FAILED: same {', '.join(same)}"


def _comparison_table(
    title: str, comparisons: Sequence[OutputComparison], first_column: str = "output"
) -> None:
    """One row per compared tensor: its error statistics, worst element, tolerance and verdict."""
    from rich.text import Text

    columns = (
        first_column,
        "max abs",
        "mean abs",
        "median abs",
        "max rel",
        "mean rel",
        "median rel",
        "worst index",
        "tolerance",
        "verdict",
    )
    table = new_table(title, columns)
    for c in comparisons:
        table.add_row(
            Text(c.name),
            _number(c.max_abs),
            _number(c.mean_abs),
            _number(c.median_abs),
            _number(c.max_rel),
            _number(c.mean_rel),
            _number(c.median_rel),
            "-" if c.worst_index is None else str(list(c.worst_index)),
            c.tolerance.describe(),
            _verdict(c),
        )
    console().print(table)
    for c in comparisons:
        if not c.passed and c.reason:
            info(f"  {c.name}: {c.reason}")


def _print_report(report: ValidationReport) -> None:
    """The comparisons of every input set, then on a failure the localisation."""
    many = len(report.iterations) > 1
    for k, comparisons in enumerate(report.iterations):
        title = f"{report.device} against {report.reference}" + (f", input set {k}" if many else "")
        _comparison_table(title, comparisons)
    if report.localisation is not None:
        _print_localisation(report.localisation, report.failed_iteration if many else None)


def _print_localisation(loc: Localisation, iteration: int | None) -> None:
    """Where the split starts to differ: the subgraphs checked, the first that differs, the bisection."""
    for note in loc.notes:
        info(note)
    where = f" (input set {iteration})" if iteration is not None else ""
    for check in loc.checked:
        info(f"  {check.name} on {check.device}: {'within tolerance' if check.passed else 'DIFFERS'}{where}")
    first = loc.first
    if first is None:
        return
    shown = ", ".join(first.nodes[:SHOWN_NODES])
    more = f" and {len(first.nodes) - SHOWN_NODES} more" if len(first.nodes) > SHOWN_NODES else ""
    info(
        f"The first subgraph that differs: {first.name} on {first.device}, {len(first.nodes)} node(s): "
        f"{shown}{more}"
    )
    _comparison_table(f"Tensors {first.name} hands on that differ", first.differing, "tensor")
    for k, step in enumerate(loc.bisect):
        span = step.nodes[0] if len(step.nodes) == 1 else f"{step.nodes[0]} .. {step.nodes[-1]}"
        worst = max((c.max_abs for c in step.comparisons if c.max_abs is not None), default=0.0)
        # a tensor compared as no numbers (shapes that differ) says why, not an error of 0
        uncompared = next((c for c in step.comparisons if not c.passed and c.max_abs is None), None)
        detail = f"{uncompared.name}: {uncompared.reason}" if uncompared else f"max abs error {worst:.4g}"
        info(
            f"  bisect {k}: {len(step.nodes)} node(s) {span} on {step.device}: "
            f"{'within tolerance' if step.passed else 'DIFFERS'} ({detail})"
        )
    if loc.culprit:
        what = "node" if len(loc.culprit) == 1 else f"group of {len(loc.culprit)} nodes"
        info(f"The {what} that differs fed the reference's values: {', '.join(loc.culprit)}")
