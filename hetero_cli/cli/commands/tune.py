"""``hetero tune``: the placement that runs fastest on this machine, found by measuring candidates within a
time budget, validated against the whole model and saved as a model with an affinity in each node (manual
mode: every other command runs it as is). A thin layer over app.tune.tune_model."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from ...app import benchmark as bench
from ...app.tune import DEFAULT_TOLERANCES, Validation, tune_model
from ...app.tune.chart import write_chart
from ...app.tune.decide import MIN_NOISE
from ...app.tune.runs import MEASURED_CONFIG_KEY
from ...app.validate import Tolerances, check_sized, input_shapes
from ...errors import TuneBudgetError
from ...graph import Model
from ...placement import devices as registry
from ..files import benchmark_line, check_writable, save_model
from ..floats import FiniteFloat
from ..options import config_options, debug_option, int_range_option, int_ranges, named, read_config_file
from ..output import console, info, new_table
from ..progress import keep_cursor
from ..runner import CONTEXT, running, written
from ..setup import Setup, prepare
from ..tolerance_lists import ToleranceListsCommand, check_outputs

#: the files --report DIR writes
REPORT_JSON = "tune_report.json"
REPORT_CHART = "tune_chart.png"


@click.command(
    cls=ToleranceListsCommand,  # --atol and --rtol take several values, as hetero validate's do
    context_settings=CONTEXT,
    short_help="Find the fastest placement on this machine by measuring; --save it.",
)
@click.option("-m", "model", metavar="MODEL", help="ONNX model (default: models/digits.onnx).")
@click.option(
    "-d",
    "device",
    required=True,
    metavar="DEVICE",
    help="HETERO:<dev>,<dev>,...: the devices to choose from.",
)
@click.option(
    "-shape", "shape", metavar="SHAPE", help="Fill dynamic dimensions: [1,3,96,96] or name[1,3,96,96],..."
)
@click.option(
    "-data_shape", "data_shape", metavar="SHAPE", help="Shape of the data for dynamic inputs (same syntax)."
)
@click.option(
    "-i", "inputs", multiple=True, metavar="[NAME:]FILE",
    help="Input data as hetero benchmark takes it: images, .npy or raw files (seeded random data otherwise).",
)  # fmt: skip
@click.option(
    "-t",
    "budget_s",
    type=FiniteFloat(min=0, min_open=True),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Time budget of the search, measurements included.",
)
@click.option(
    "--save",
    required=True,
    metavar="OUT.onnx",
    callback=named,
    help="Write the model with the winning affinities (hetero benchmark -m OUT.onnx runs it as is).",
)
@click.option(
    "--report",
    "report_dir",
    metavar="DIR",
    callback=named,
    help=f"Write {REPORT_JSON} (every candidate, the machine) and {REPORT_CHART} into DIR.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the random inputs and the search.",
)
@int_range_option
@click.option(
    "--atol",
    multiple=True,
    metavar="[OUT:]V",
    help="Validation's absolute tolerance (default 1e-3), per output.",
)
@click.option(
    "--rtol",
    multiple=True,
    metavar="[OUT:]V",
    help="Validation's relative tolerance (default 1e-3), per output.",
)
@config_options
@debug_option
def tune(
    model: str | None,
    device: str,
    shape: str | None,
    data_shape: str | None,
    inputs: Sequence[str],
    budget_s: float,
    save: str,
    report_dir: str | None,
    seed: int,
    int_range: Sequence[str],
    atol: Sequence[str],
    rtol: Sequence[str],
    config: Sequence[str],
    load_config: str | None,
    debug: bool,
) -> int:
    """Find the placement of MODEL over DEVICE's devices that runs fastest on this machine, and save it.

    The candidates: the automatic plan, each single device that supports every node, placements a cost
    model builds from each region's measured time on each device, and placements whose branches run at
    once (HETERO_CONCURRENCY=CONCURRENT, forks cut apart even on one device) or in turn where that differs
    from the default; the most promising are measured end to end, interleaved, within the budget (-t). The
    best split, the automatic plan and each single device are then timed each alone in its own process, in
    rounds: the split is saved only where it beats the best single device and the automatic plan by more
    than the measured noise (with its concurrency mode, which a compile of the file takes). Its outputs
    are validated against one CPU session of the whole model: exit 0 where they pass, 1 where no candidate
    passed (the fastest is saved all the same, to look into).

    \b
      hetero tune -m model.onnx -d HETERO:OPENVINO,CPU --save tuned.onnx
      hetero tune -m det.onnx -d HETERO:OPENVINO,CPU -data_shape [1,3,320,320] -t 30 --save det_tuned.onnx --report out
      hetero benchmark -m det_tuned.onnx -d HETERO:OPENVINO,CPU -data_shape [1,3,320,320]   # the placement saved
    """
    check_writable(save, "--save", folder=False)
    check_writable(report_dir, "--report", folder=True)
    tolerances = _tolerances(atol, rtol)
    setup = prepare(model, device, config=config, load_config=load_config)
    setup.check_not_read(save, "--save")
    check_outputs(tolerances, setup.model, "--atol/--rtol")
    names = [i.name for i in setup.model.inputs]
    with_files = bench.parse_input_files(inputs, names) if inputs else {}
    given, ranges = int_ranges(setup.model, int_range, with_files)
    feeds, shapes = _inputs(setup.model, inputs, shape, data_shape, seed, given)
    _check_devices(setup)
    running()
    info(f"Tuning {setup.request} for {setup.model_path} within {budget_s:g} s")
    for name, text in ranges.items():
        info(f"    {name}: random {text}")
    result = _search(setup, feeds, shapes, budget_s, seed, tolerances, given if feeds is None else None)
    report = result.report
    _record_config(result, config, load_config)
    _print_candidates(report)
    _print_verdict(report)
    sizes = [("-shape", shape), ("-data_shape", data_shape), *(("-i", value) for value in inputs)]
    _save_model(result.model, save, setup, sizes)
    if report_dir:
        _save_report(report, Path(report_dir))
    if report.validation is not None and report.validation.passed:
        return 0
    # no candidate passed validation: the fastest is saved for a look (hetero validate --bisect tells where
    # it differs), and the command says FAILED as hetero validate does: exit 1, the files it wrote stay
    written().keep()
    return 1


def _record_config(result: Any, config: Sequence[str], load_config: str | None) -> None:
    """The configuration the candidates were measured with (the command line's --config and -load_config:
    the core's properties every compile of the search used) in the report and the saved model's metadata
    (runs.MEASURED_CONFIG_KEY), where there is any."""
    given: dict[str, Any] = {}
    if load_config:
        given["-load_config"] = read_config_file(load_config)
    if config:
        given["--config"] = list(config)
    if given:
        result.report.config = given
        result.model.set_metadata(MEASURED_CONFIG_KEY, json.dumps(given))


def _tolerances(atol: Sequence[str], rtol: Sequence[str]) -> Tolerances:
    """--atol and --rtol over tune's defaults (looser than validate's: OpenVINO's float arithmetic is not
    the CPU EP's; the same infinity or NaN on both sides equal), later values winning. Raises
    ValidationError for a bad value."""
    default = DEFAULT_TOLERANCES
    return Tolerances.parse(
        [f"{default.default.atol:g}", *atol],
        [f"{default.default.rtol:g}", *rtol],
        infinities_compare_equal=default.infinities_compare_equal,
        nans_compare_equal=default.nans_compare_equal,
    )


def _check_devices(setup: Setup) -> None:
    """Tuning chooses among devices: a HETERO string of two or more available here, else a usage error
    naming -d."""
    names = setup.request.names
    if not setup.request.hetero or len(names) < 2:
        raise click.BadParameter(
            f"{setup.device!r} is one device: tune chooses where each node runs among several, so give two or "
            f"more, e.g. HETERO:{names[0] if names[0] != 'CPU' else 'OPENVINO'},CPU",
            param_hint="-d",
        )
    missing = [(d.name, registry.unavailable_reason(d)) for d in setup.request.priorities]
    missing = [(name, why) for name, why in missing if why]
    if len(names) - len(missing) < 2:
        why = "; ".join(f"{name}: {why}" for name, why in missing)
        raise click.BadParameter(
            f"tune needs two devices available here to choose between, and {setup.device} leaves "
            f"{len(names) - len(missing)}: {why}. Devices available here: {', '.join(registry.available_devices())}",
            param_hint="-d",
        )


def _inputs(
    model: Model,
    files: Sequence[str],
    shape: str | None,
    data_shape: str | None,
    seed: int,
    ranges: Mapping[str, tuple[int, int]] | None = None,
) -> tuple[list[dict[str, Any]] | None, dict[str, tuple[int, ...]] | None]:
    """The tuning's inputs: with -i, one input set read from the files (random data for inputs without
    one, integers within ``ranges``: --int-range's), as hetero benchmark reads them and sizes their
    dynamic dimensions; else None and each input's shape for seeded random data. A dynamic dimension that
    neither -shape, -data_shape nor an -i file sizes is a usage error: its size decides which placement is
    fastest, so the user chooses it. Raises ValidationError or BenchmarkError."""
    if not files:
        bench.check_random_data(model, {})  # strings: -i gives them, before anything runs
        return None, input_shapes(model, shape, data_shape)
    given = bench.parse_input_files(files, [i.name for i in model.inputs])
    shapes, filled = bench.file_data_shapes(model, given, shape, data_shape)
    check_sized(filled, files=True)
    bench.check_random_data(model, given)
    return bench.input_sets(model, shapes, given, 1, seed=seed, int_ranges=ranges), None


def _search(
    setup: Setup,
    feeds: list[dict[str, Any]] | None,
    shapes: dict[str, tuple[int, ...]] | None,
    budget_s: float,
    seed: int,
    tolerances: Tolerances,
    ranges: Mapping[str, tuple[int, int]] | None = None,
) -> Any:
    """tune_model with a progress bar on stderr (where it is no terminal, an ``[ INFO ]`` line per phase on
    stdout, as hetero benchmark prints its steps); a budget
    too small for the search is the user's to fix (-t), a usage error."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True, highlight=False)
    shown: set[str] = set()
    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(), console=err, transient=True,
    )  # fmt: skip
    task = bar.add_task("starting", total=1.0)

    def progress(text: str, fraction: float) -> None:
        if err.is_terminal:
            bar.update(task, description=text, completed=min(max(fraction, 0.0), 1.0))
        elif _phase(text) not in shown:  # "timing region 1/16": one line, not sixteen
            shown.add(_phase(text))
            info(text)

    try:
        if err.is_terminal:
            bar.start()
            keep_cursor(err)
        return tune_model(
            setup.core,
            setup.model,
            setup.device,
            inputs=feeds,
            shapes=shapes,
            budget_s=budget_s,
            seed=seed,
            tolerances=tolerances,
            progress=progress,
            int_ranges=ranges,
        )
    except TuneBudgetError as exc:
        raise click.BadParameter(str(exc), param_hint="-t") from None
    finally:
        if err.is_terminal:
            bar.stop()


def _phase(text: str) -> str:
    """A progress text without its counters, which tells one phase from the next."""
    return re.sub(r"\d+(/\d+)?", "#", text)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}" if value < 10 else f"{value:.2f}"


def _ratio(value: float | None, base: float | None) -> str:
    return "-" if value is None or not base else f"{value / base:.3f}x"


def per_process(report: Any) -> bool:
    """Whether the report's finalists were timed each in its own process (their figures decide)."""
    return any(c.final_ms is not None for c in report.candidates)


def figure(c: Any, final: bool) -> float | None:
    """Candidate ``c``'s figure: its per-process median where ``final`` (None for a candidate not timed
    so), else the search's in-process median."""
    return c.final_ms if final else c.median_ms


def single_devices(report: Any) -> dict[str, float]:
    """{device: ms} of the report's single-device candidates that were measured: per-process medians where
    the finalists were timed so, else the search's medians."""
    final = per_process(report)
    return {
        c.name: ms
        for c in report.candidates
        if (ms := figure(c, final)) is not None and c.kind == "single" and c.error is None
    }


def _versus(report: Any, name: str, other: str | None) -> str:
    """``name`` against ``other`` as the decision compared them: the block ratio and its noise."""
    if other is None:
        return "-"
    if name == other:
        return "1.000x"
    vs = report.versus(name, other)
    return "-" if vs is None else f"{vs.ratio:.3f}x ±{vs.noise:.1%}"


def _print_candidates(report: Any) -> None:
    """One row per candidate tried: its placement, the prediction, the measured medians and the ratios
    (block by block, with their noise, where the finalists were timed per process)."""
    from rich.text import Text

    final = per_process(report)
    if final:
        how = "ratios: block by block against the fastest single device and the automatic plan, ± their noise"
    else:
        how = "ratios: of the search's medians"
    title = (
        f"Candidates on {report.device} (median: the search's, interleaved in one process; final: the "
        f"median of the finalists' per-process medians, each alone in its own process; {how})"
    )
    columns = (
        "candidate",
        "kind",
        "subgraphs",
        "devices",
        "predicted ms",
        "median ms",
        "final ms",
        "vs fastest single device",
        "vs automatic",
        "note",
    )
    table = new_table(title, columns)
    singles = single_devices(report)
    fastest = min(singles.values(), default=None)
    automatic = report.candidate("automatic")
    best = report.best_single or None
    for c in report.candidates:
        mark = " (winner)" if c.name == report.winner else ""
        if final:
            timed = c.final_ms is not None
            vs_single = _versus(report, c.name, best) if timed else "-"
            vs_automatic = _versus(report, c.name, automatic.name) if timed else "-"
        else:
            vs_single, vs_automatic = _ratio(c.median_ms, fastest), _ratio(c.median_ms, automatic.median_ms)
        table.add_row(
            Text(c.name + mark),
            c.kind,
            "-" if c.subgraphs is None else str(c.subgraphs),
            Text(", ".join(c.devices)),
            _ms(c.predicted_ms),
            _ms(c.median_ms),
            _ms(c.final_ms),
            vs_single,
            vs_automatic,
            Text(c.error or ("not measured" if c.median_ms is None else "")),
        )
    console().print(table)


def _print_verdict(report: Any) -> None:
    """The winner against each single device and the automatic plan, then the validation's verdict."""
    winner = next(c for c in report.candidates if c.name == report.winner)
    final = per_process(report)
    mine = figure(winner, final)
    how = "per process" if final else "in the search"
    info(
        f"Winner: {winner.name} ({winner.kind}), {winner.subgraphs} subgraph(s) on {', '.join(winner.devices)}: "
        f"{_ms(mine)} ms {how}"
    )
    if report.decision:
        info(f"Why: {report.decision}")
    for c in report.candidates:
        if c.process_ms:
            info(f"  {c.name}: per-process medians {', '.join(_ms(x) for x in c.process_ms)} ms")
    if report.noise is not None:
        info(
            f"Noise: {report.noise:.1%} (the largest of the finalists' block-by-block comparisons, "
            f"{MIN_NOISE:.0%} at least): a split must beat the single devices and the automatic plan by more"
        )
    automatic = report.candidate("automatic")
    bases = {**single_devices(report), "automatic": figure(automatic, final)}
    for name, ms in bases.items():
        if ms is None or mine is None or name == winner.name:
            continue
        label = "the automatic plan" if name == "automatic" else name
        vs = report.versus(winner.name, name) if final else None
        if vs is None:
            info(f"  against {label} ({_ms(ms)} ms): {_speed_ratio(mine / ms)}")
        else:
            info(
                f"  against {label} ({_ms(ms)} ms): {_speed_ratio(vs.ratio)} block by block, noise {vs.noise:.1%}"
            )
    info(f"Search: {report.elapsed_s:.1f} s of a {report.budget_s:g} s budget, seed {report.seed}")
    for note in report.notes:
        info(note)
    _print_validation(report.validation)


def _speed_ratio(ratio: float) -> str:
    """``1.18x faster`` / ``1.02x slower`` / ``as fast`` (within 0.5 %) for a time ratio mine / theirs."""
    if abs(ratio - 1.0) <= 0.005:
        return "as fast"
    return f"{1 / ratio:.2f}x faster" if ratio < 1 else f"{ratio:.2f}x slower"


def _print_validation(validation: Validation | None) -> None:
    """PASSED or FAILED against the whole model, with each output's largest errors."""
    outputs = validation.outputs if validation is not None else ()
    detail = ", ".join(
        f"{o.name} max abs {_number(o.max_abs)}, max rel {_number(o.max_rel)}" for o in outputs
    )
    verdict = "PASSED" if validation is not None and validation.passed else "FAILED"
    where = f" ({detail})" if detail else ""
    info(f"Validation of the winner against one session of the whole model: {verdict}{where}")


def _number(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, int | float) else "-"


def _save_model(model: Model, save: str, setup: Setup, sizes: list[tuple[str, str | None]]) -> None:
    """--save: the model with the winning affinities, folders created on the way; ``sizes``: the -shape,
    -data_shape and -i the tune was given, for the command that runs it at the sizes tuned."""
    save_model(model, save)
    run = benchmark_line(save, setup.request, model, sizes)
    info(f"Saved {save} with the winning affinities: {run} runs it as is")
    measured = model.metadata_props.get(MEASURED_CONFIG_KEY)
    if measured:
        info(
            f"It was measured with the configuration {measured} (kept in the file's metadata, "
            f"{MEASURED_CONFIG_KEY}): give the same --config to run it as measured"
        )


def _save_report(report: Any, folder: Path) -> None:
    """--report: the JSON report and the chart in ``folder``."""
    written().before_writing(folder, folder=True)
    folder.mkdir(parents=True, exist_ok=True)
    doc = report.to_dict()
    path = folder / REPORT_JSON
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    written().wrote(path)
    info(f"Wrote {path}")
    if not any(doc.get("per_subgraph", {}).values()):
        info(
            f"No {REPORT_CHART}: the budget left no time for the times per subgraph (a larger -t gives them)"
        )
        return
    chart = folder / REPORT_CHART
    written().wrote(chart)
    write_chart(doc, chart)
    info(f"Wrote {chart}")
