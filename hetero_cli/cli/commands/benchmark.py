"""``hetero benchmark``: measure latency and throughput the way OpenVINO's benchmark_app does, its eleven
steps printed as benchmark_app prints them; the measuring and the reports are app.benchmark's."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import numpy as np

from ... import __version__
from ...app import benchmark as bench
from ...core import Core
from ...graph import Model, shape_text
from ...placement import config as cfg
from ...placement import devices as registry
from ...runtime import CompiledModel, format_counters
from ..files import check_report_folder, check_writable, write_json
from ..options import named, shared, shared_options
from ..output import info, step, warn
from ..runner import CONTEXT, Command, written
from ..setup import Setup, compile_setup, prepare

PROFILED_RUNS = 10


@click.command(
    cls=Command,
    context_settings=CONTEXT,
    short_help="Measure latency and throughput, like benchmark_app.",
)
@click.option("-m", "model", metavar="MODEL", help="ONNX model (default: models/digits.onnx).")
@click.option(
    "-d",
    "device",
    default="CPU",
    show_default=True,
    metavar="DEVICE",
    help="CPU, OPENVINO, GPU or HETERO:...",
)
@click.option(
    "-i", "inputs", multiple=True, metavar="[NAME:]FILE",
    help="Input data: images, .npy or raw binary files, or folders of them (seeded random data otherwise).",
)  # fmt: skip
@click.option(
    "-shape", "shape", metavar="SHAPE", help="Fill dynamic dimensions: [1,1,32,32] or name[1,1,32,32],..."
)
@click.option(
    "-data_shape", "data_shape", metavar="SHAPE", help="Shape of the data for dynamic inputs (same syntax)."
)
@click.option("-niter", type=click.IntRange(min=1), help="Number of iterations.")
@click.option(
    "-t", "time_s", type=click.IntRange(min=1), help="Seconds to run (default 60 when -niter is not given)."
)
@click.option(
    "-nireq", type=click.IntRange(min=1), help="Number of infer requests (async: run concurrently)."
)
@click.option(
    "-api",
    type=click.Choice(["sync", "async"]),
    default="async",
    show_default=True,
    help="sync: one request.",
)
@click.option("-hint", type=click.Choice(["latency", "throughput", "none"]), help="Performance hint.")
@click.option("-pc", "perf_counts", is_flag=True, help="Print performance counters per infer request.")
@click.option(
    "-pcsort",
    type=click.Choice(["sort", "no_sort", "simple_sort"]),
    help="Print the counters as a table: sort (by real time), no_sort, simple_sort (only the executed).",
)
@click.option(
    "-report_type", type=click.Choice(list(bench.REPORT_TYPES)), help="Write benchmark_app's CSV reports."
)
@click.option("-report_folder", metavar="DIR", callback=named, help="Folder for the reports (default: here).")
@click.option("-json_stats", is_flag=True, help="Write the reports as JSON instead of CSV.")
@click.option(
    "-dump_config",
    metavar="FILE",
    callback=named,
    help="Write the configuration used as JSON {device: {key: value}}.",
)
@click.option(
    "--layout", type=click.Choice(["NCHW", "NHWC"], case_sensitive=False), help="Layout of image inputs."
)
@shared_options
def benchmark(
    model: str | None,
    device: str,
    inputs: tuple[str, ...],
    shape: str | None,
    data_shape: str | None,
    niter: int | None,
    time_s: int | None,
    nireq: int | None,
    api: str,
    hint: str | None,
    perf_counts: bool,
    pcsort: str | None,
    report_type: str | None,
    report_folder: str | None,
    json_stats: bool,
    dump_config: str | None,
    layout: str | None,
    **options: Any,
) -> None:
    """Measure MODEL on DEVICE the way OpenVINO's benchmark_app does.

    \b
      hetero benchmark -m models/digits.onnx -d HETERO:GPU,OPENVINO,CPU -niter 1000 -pc
    """
    given = _given_on_command_line(click.get_current_context())
    counters = perf_counts or bool(pcsort) or report_type in ("average_counters", "detailed_counters")
    counted_everywhere = counters  # asked on the command line: every device's subgraphs are counted
    if (json_stats or report_folder) and not report_type:
        report_type = "no_counters"
    step(1, "Parsing and validating input arguments")
    check_report_folder(report_folder, report_type)
    check_writable(dump_config, "-dump_config", folder=False)
    duration = time_s if time_s is not None else (None if niter else 60)
    if api == "sync" and nireq not in (None, 1):
        warn(f"-api sync uses one infer request; -nireq {nireq} ignored")
        nireq = 1
    step(2, "Loading hetero-cli")
    info(f"hetero-cli {__version__}; devices available here: {', '.join(registry.available_devices())}")
    step(3, "Setting device configuration")
    t0 = time.perf_counter()
    setup = prepare(model, device, announce=False, **shared(options))
    read_ms = (time.perf_counter() - t0) * 1000.0
    hint_given = hint is not None or _configured(setup.core, cfg.PERFORMANCE_HINT) is not None
    hint, nireq = _hint_and_requests(setup, hint, api, nireq)
    if not perf_counts and _profiling_configured(setup):
        perf_counts = counters = True  # PERF_COUNT=YES in a config prints the counters, as -pc does
    step(4, "Reading model files")
    info(f"Read model {setup.model_path} took {read_ms:.2f} ms")
    _print_io(setup.model)
    step(5, "Resizing model to match image sizes and given batch")
    files, shapes, batch = _input_data(setup.model, inputs, shape, data_shape, nireq, layout)
    step(7, "Loading the model to the device")
    t0 = time.perf_counter()
    compiled = compile_setup(setup)
    compile_ms = (time.perf_counter() - t0) * 1000.0
    info(f"Compile model took {compile_ms:.2f} ms")
    step(8, "Querying optimal runtime parameters")
    if not hint_given:
        warn(f"Performance hint was not explicitly specified in command line: it is set to {hint.upper()}")
    _print_runtime_parameters(compiled, nireq)
    step(9, "Creating infer requests and preparing input tensors")
    feeds = bench.input_sets(setup.model, shapes, files, nireq, layout=layout)
    if dump_config:
        write_json(dump_config, bench.config_document(compiled))
        info(f"Configuration written to {dump_config}")
    planned = bench.planned_iterations(niter, nireq, api)
    if planned != niter:
        info(f"Number of iterations rounded up to {planned} for {nireq} infer requests")
    step(10, f"Measuring performance ({_measuring_text(api, nireq, planned, duration)})")
    if api == "async":
        info(
            f"{nireq} requests in flight on an AsyncInferQueue: each device runs its subgraphs on its own "
            "pipeline thread, so requests overlap across devices"
        )
    result = _measure(compiled, feeds, nireq, api, planned, duration, batch)
    info(f"First inference took {result.first_inference_ms:.2f} ms")
    per_request: list[list[Any]] = []
    history: list[list[Any]] = []
    if counters:
        per_request, history = _profile(setup, feeds, nireq, everywhere=counted_everywhere)
    step(11, "Dumping statistics report")
    if counters and (perf_counts or pcsort):
        for k, infos in enumerate(per_request):
            info(f"Performance counts{' sorted' if pcsort else ''} for {k}-th infer request")
            click.echo(bench.sorted_counters(infos, pcsort) if pcsort else format_counters(infos))
    _print_statistics(compiled, result)
    if report_type:
        _write_statistics(
            report_folder or ".",
            report_type,
            json_stats=json_stats,
            parameters=given,
            configuration=_configuration(compiled, nireq, api),
            results=[
                ("read model time (ms)", read_ms),
                ("compile model time (ms)", compile_ms),
                *_result_rows(result, nireq),
            ],
            per_request=per_request,
            average=bench.average_counters(history) if history else [],
        )


def _hint_and_requests(setup: Setup, hint: str | None, api: str, nireq: int | None) -> tuple[str, int]:
    """The hint (-hint, else a PERFORMANCE_HINT from --config or -load_config, else benchmark_app's default
    for -api) and the number of infer requests, applied to the setup's HETERO config."""
    hint = (
        hint
        or _configured(setup.core, cfg.PERFORMANCE_HINT)
        or ("throughput" if api == "async" else "latency")
    )
    if nireq is None:
        nireq = 1 if api == "sync" or hint == "latency" else max(2, min(4, os.cpu_count() or 1))
    _apply_hint(setup, hint, nireq)
    return hint, nireq


def _input_data(
    model: Model,
    inputs: Sequence[str],
    shape: str | None,
    data_shape: str | None,
    nireq: int,
    layout: str | None,
) -> tuple[dict[str, list[Path]], dict[str, tuple[int, ...]], int]:
    """Steps 5 and 6: the -i files per input, each input's data shape and the batch size, printed."""
    files = bench.parse_input_files(inputs, [i.name for i in model.inputs])
    sizes = bench.image_dims(model, files, layout)
    shapes, notes = bench.data_shapes(model, shape, data_shape, nireq, sizes)
    for note in notes:
        info(note)
    batch = bench.batch_size(shapes)
    info(f"Model batch size: {batch}")
    step(6, "Configuring input of the model")
    bench.check_random_data(model, files)  # before anything is compiled or written
    for name, dims in shapes.items():
        source = f"{len(files[name])} file(s)" if name in files else "seeded random values"
        info(f"    {name}: data {shape_text(dims)} from {source}")
    return files, shapes, batch


def _given_on_command_line(ctx: click.Context) -> list[tuple[str, Any]]:
    """(option, value) for each option given on the command line: the reports' command line parameters."""
    return [
        (p.opts[0], ctx.params[p.name])
        for p in ctx.command.params
        if p.name in ctx.params and ctx.get_parameter_source(p.name) == click.core.ParameterSource.COMMANDLINE
    ]


def _print_runtime_parameters(compiled: CompiledModel, nireq: int) -> None:
    """Step 8: the compiled model's devices, subgraph count and hint."""
    info(f"  EXECUTION_DEVICES: {', '.join(compiled.get_property('EXECUTION_DEVICES'))}")
    info(f"  NUMBER_OF_SUBGRAPHS: {compiled.get_property('NUMBER_OF_SUBGRAPHS')}")
    info(f"  PERFORMANCE_HINT: {compiled.get_property('PERFORMANCE_HINT')}; infer requests: {nireq}")


def _measuring_text(api: str, nireq: int, planned: int | None, duration: int | None) -> str:
    """Step 10's header: the mode, the requests and the limits of the measured loop."""
    limits = []
    if planned:
        limits.append(f"{planned} iterations")
    if duration:
        limits.append(f"{duration * 1000} ms duration")
    mode = "synchronously" if api == "sync" else "asynchronously"
    return f"Start inference {mode}, {nireq} inference requests, limits: {', '.join(limits)}"


def _print_statistics(compiled: CompiledModel, result: bench.Measurement) -> None:
    """Step 11: benchmark_app's summary of the measured loop."""
    info(f"Execution Devices:{compiled.execution_devices}")
    info(f"Count:            {result.count} iterations")
    info(f"Duration:         {result.duration_ms:.2f} ms")
    info("Latency:")
    info(f"   Median:        {result.latency_median_ms:.2f} ms")
    info(f"   Average:       {result.latency_average_ms:.2f} ms")
    info(f"   Min:           {result.latency_min_ms:.2f} ms")
    info(f"   Max:           {result.latency_max_ms:.2f} ms")
    info(f"Throughput:   {result.throughput_fps:.2f} FPS")


def _result_rows(result: bench.Measurement, nireq: int) -> list[tuple[str, Any]]:
    """The measured loop's rows of benchmark_app's execution results report."""
    return [
        ("first inference time (ms)", result.first_inference_ms),
        ("total execution time (ms)", result.duration_ms),
        ("total number of iterations", result.count),
        ("number of parallel infer requests", nireq),
        ("latency (ms)", result.latency_median_ms),
        ("avg latency", result.latency_average_ms),
        ("min latency", result.latency_min_ms),
        ("max latency", result.latency_max_ms),
        ("throughput", result.throughput_fps),
    ]


def _write_statistics(folder: str, report_type: str, **report: Any) -> None:
    """benchmark_app's statistics reports in ``folder``; a later failure removes them (``written``)."""
    written().before_writing(Path(folder), folder=True)
    for path in bench.write_reports(folder, report_type, **report):
        written().wrote(path)
        info(f"Statistics report is stored to {path}")


def _configuration(compiled: CompiledModel, nireq: int, api: str) -> list[tuple[str, Any]]:
    """The rows of the reports' configuration section: the run's settings, then each device's config."""
    rows: list[tuple[str, Any]] = [
        ("device", compiled.device_name),
        ("EXECUTION_DEVICES", ",".join(compiled.execution_devices)),
        ("NUMBER_OF_SUBGRAPHS", len(compiled.subgraphs)),
        ("PERFORMANCE_HINT", str(compiled.get_property("PERFORMANCE_HINT"))),
        ("api", api),
        ("nireq", nireq),
    ]
    for device, values in bench.config_document(compiled).items():
        for key, value in values.items():
            rows.append((f"{device}: {key}", value))
    return rows


def _profiling_configured(setup: Setup) -> bool:
    """Whether --config or -load_config set PERF_COUNT=YES for HETERO or for a device of the request."""
    devices = ["HETERO", *(dev.name for dev in setup.request.priorities)]
    return any(
        cfg.parse_bool(cfg.PERF_COUNT, _configured(setup.core, cfg.PERF_COUNT, d) or "NO") for d in devices
    )


def _configured(core: Core, key: str, device: str = "HETERO") -> str | None:
    """``device``'s property ``key`` as --config or -load_config set it (lower case), or None."""
    value = core.configured(device, key)
    return None if value is None else str(value).lower()


def _apply_hint(setup: Setup, hint: str, nireq: int) -> None:
    """-hint as HETERO's PERFORMANCE_HINT (none: the config's, else LATENCY); -hint throughput with several
    requests also shares the cores between them, unless threads were set."""
    if hint != "none":
        setup.core.set_property("HETERO", {cfg.PERFORMANCE_HINT: hint.upper()})
    if hint != "throughput" or nireq <= 1:
        return
    cores = os.cpu_count() or 1
    threads = max(1, cores // nireq)
    changed = []
    for dev in setup.request.priorities:
        if dev.kind.family not in ("CPU", "OPENVINO") or not registry.is_available(dev):
            continue
        if setup.core.get_property(dev.name, cfg.NUM_THREADS) in (None, 0, "0"):  # 0: not chosen
            setup.core.set_property(dev.name, {cfg.NUM_THREADS: threads})
            changed.append(dev.name)
    if changed:
        info(
            f"-hint throughput: {nireq} requests share {cores} cores, {cfg.NUM_THREADS}={threads} for {', '.join(changed)}"
        )


def _print_io(model: Model) -> None:
    """Step 4: the model's inputs and outputs with their types and shapes."""
    info("Model inputs:")
    for t in model.inputs:
        info(f"    {t.name} : {t.dtype} / {shape_text(t.shape)}")
    info("Model outputs:")
    for t in model.outputs:
        info(f"    {t.name} : {t.dtype} / {shape_text(t.shape)}")


def _measure(
    compiled: CompiledModel,
    feeds: Sequence[Mapping[str, np.ndarray]],
    nireq: int,
    api: str,
    niter: int | None,
    duration: int | None,
    batch: int,
) -> bench.Measurement:
    """Step 10: the measured loop (app.benchmark's), with a progress bar on stderr."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    total = float(niter) if niter else float(duration or 1)
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=console,
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

        return bench.measure(
            compiled,
            feeds,
            nireq=nireq,
            api=api,
            niter=niter,
            duration_s=duration,
            batch=batch,
            on_progress=update,
        )


def _profile(
    setup: Setup, feeds: Sequence[Mapping[str, np.ndarray]], nireq: int, *, everywhere: bool
) -> tuple[list[Any], list[Any]]:
    """Counters from a profiled compile, PROFILED_RUNS inferences per request, run after the measured loop.

    The measured loop runs without the profiler (unless a config turned PERF_COUNT on for it), so -pc does
    not change the numbers it reports. ``everywhere`` (-pc, -pcsort, a counters report) profiles every
    device's subgraphs; else the config's PERF_COUNT stands, so a device's own PERF_COUNT=YES counts only
    that device's subgraphs.
    """
    info(f"Collecting performance counters: {PROFILED_RUNS} profiled inferences per infer request")
    if everywhere:
        setup.core.set_property("HETERO", {cfg.PERF_COUNT: "YES"})
    profiled = setup.core.compile_model(setup.model, setup.device)
    per_request, history = [], []
    for k in range(nireq):
        request = profiled.create_infer_request()
        for _ in range(PROFILED_RUNS):
            request.infer(feeds[k % len(feeds)])
        per_request.append(request.get_profiling_info())
        history += request.get_profiling_history()[1:]  # the first profiled run is a warm-up
    return per_request, history
