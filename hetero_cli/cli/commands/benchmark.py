"""``hetero benchmark``: measure latency and throughput the way OpenVINO's benchmark_app does, its eleven
steps printed as benchmark_app prints them, its options read as it reads them (cli/bapp_args.py); the
measuring, the settings and the reports are app.benchmark's, the printing cli/bench_steps.py's."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click
import numpy as np

from ... import __version__
from ...app import benchmark as bench
from ...app.benchmark.inputs import IMAGE_SUFFIXES
from ...errors import BenchmarkError
from ...graph import Model, shape_text
from ...placement import config as cfg
from ...placement import devices as registry
from ...runtime import CompiledModel
from ..bapp_args import BenchmarkAppCommand, benchmark_app_options
from ..bench_steps import (
    apply_hint,
    configured,
    given_on_command_line,
    measuring_text,
    print_counters,
    print_io,
    print_runtime_parameters,
    print_statistics,
    profiling_configured,
    result_rows,
    write_statistics,
)
from ..files import check_report_folder, check_writable, write_json
from ..options import int_ranges, shared, shared_options
from ..output import info, step, warn
from ..progress import bar, busy
from ..runner import CONTEXT
from ..setup import Setup, compile_setup, prepare

PROFILED_RUNS = 10


@click.command(
    cls=BenchmarkAppCommand,
    context_settings=CONTEXT,
    short_help="Measure latency and throughput, like benchmark_app.",
)
@benchmark_app_options
@shared_options
def benchmark(**options: Any) -> None:
    """Measure MODEL on DEVICE the way OpenVINO's benchmark_app does, with its options.

    \b
      hetero benchmark -m models/digits.onnx -d HETERO:GPU,OPENVINO,CPU -shape [1,1,32,32] -niter 1000 -pc
      hetero benchmark -m models/digits.onnx -b 8 -hint tput -t 10 --json > result.json

    A dynamic input needs its data shape (-shape, -data_shape, -b or -i), as in benchmark_app, or
    --fill-dynamic. Options benchmark_app has and hetero-cli cannot honour (-pin, -lfile,
    -extensions, -c) stop the command with the reason and what to use instead.
    """
    o = SimpleNamespace(**options)
    if not o.json_summary:
        _run(o)
        return
    stdout = click.get_text_stream("stdout")
    with contextlib.redirect_stdout(sys.stderr):  # the steps go to stderr, the summary alone to stdout
        doc = _run(o)
    click.echo(json.dumps(doc, indent=2), file=stdout)


def _run(o: SimpleNamespace) -> dict[str, Any]:
    """The eleven steps; returns the --json summary (-niter 0, which stops after compiling: what compiled)."""
    given = given_on_command_line(click.get_current_context())
    counters = (
        bool(o.perf_counts) or bool(o.pcsort) or o.report_type in ("average_counters", "detailed_counters")
    )
    counted_everywhere = counters  # asked on the command line: every device's subgraphs are counted
    report_type = o.report_type or ("no_counters" if o.json_stats or o.report_folder else None)
    step(1, "Parsing and validating input arguments")
    check_report_folder(o.report_folder, report_type)
    check_writable(o.dump_config, "-dump_config", folder=False, in_place=True)
    check_writable(o.exec_graph_path, "-exec_graph_path", folder=False, in_place=True)
    if o.inference_only is False:
        raise click.BadParameter(
            "hetero-cli fills the inputs once, before the measured loop (benchmark_app's mode for static "
            "shapes); filling them in the loop is for -data_shape sequences, which it does not run: "
            "leave it out or give true",
            param_hint="-inference_only",
        )
    compile_only = o.niter == 0
    duration = o.time_s if o.time_s is not None else (None if o.niter else 60)
    step(2, "Loading hetero-cli")
    info(f"hetero-cli {__version__}; devices available here: {', '.join(registry.available_devices())}")
    step(3, "Setting device configuration")
    t0 = time.perf_counter()
    setup = prepare(o.model, o.device, announce=False, **shared(vars(o)))
    setup.check_not_read(o.dump_config, "-dump_config")
    setup.check_not_read(o.exec_graph_path, "-exec_graph_path")
    read_ms = (time.perf_counter() - t0) * 1000.0
    _device_options(setup, o)
    mode = bench.run_mode(
        hint=o.hint,
        configured=configured(setup.core, cfg.PERFORMANCE_HINT),
        api=o.api.lower() if o.api else None,
        nireq=o.nireq,
        hetero=setup.request.hetero,
    )
    if mode.api == "sync" and o.nireq not in (None, 1):
        warn(f"-api sync uses one infer request; -nireq {o.nireq} ignored")
    if mode.defaulted:
        device = "HETERO" if setup.request.hetero else str(setup.request)
        click.echo(  # on stdout, as benchmark_app's warnings: a step's text, not a problem
            "[ WARNING ] Performance hint was not explicitly specified in command line or config file. "
            f"Device({device}) performance hint will be set to {mode.hint.upper()}."
        )
    info(f"Hint: {mode.why}")
    apply_hint(setup, mode.hint, mode.nireq or 1)
    perf_counts = bool(o.perf_counts)
    if not perf_counts and profiling_configured(setup):
        perf_counts = counters = True  # PERF_COUNT=YES in a config prints the counters, as -pc does
    step(4, "Reading model files")
    info(f"Read model {setup.model_path} took {read_ms:.2f} ms")
    print_io(setup.model)
    step(5, "Resizing model to match image sizes and given batch")
    data = None if compile_only else _input_data(setup.model, o, mode.nireq or 1)
    if compile_only:
        int_ranges(setup.model, o.int_range)  # refused as they would be with data
        info("-niter 0: the model is compiled and nothing runs, so no data shapes are needed")
        step(6, "Configuring input of the model")
    step(7, "Loading the model to the device")
    t0 = time.perf_counter()
    with busy("Compiling the model (and querying the devices for the automatic placement)"):
        compiled = compile_setup(setup)
    compile_ms = (time.perf_counter() - t0) * 1000.0
    cached = " (loaded from the cache)" if compiled.get_property("LOADED_FROM_CACHE") else ""
    info(f"Compile model took {compile_ms:.2f} ms{cached}")
    step(8, "Querying optimal runtime parameters")
    nireq = mode.nireq or int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    print_runtime_parameters(compiled, nireq)
    if compile_only:
        _write_files(o, compiled)
        info("-niter 0: compiled; no inference was run")
        if report_type:  # as benchmark_app's: the command line, the configuration and the two times
            if report_type != "no_counters":
                info(f"-niter 0: nothing ran, so -report_type {report_type} writes no counters")
            _statistics(
                o, "no_counters", given, setup, compiled, mode.api, batch=o.batch or 1, niter=0, nireq=nireq,
                duration_ms=0, times=(read_ms, compile_ms), results=[],
            )  # fmt: skip
        return bench.compile_summary(compiled, hint=mode.hint, read_ms=read_ms, compile_ms=compile_ms)
    assert data is not None
    step(9, "Creating infer requests and preparing input tensors")
    feeds = bench.input_sets(setup.model, data.shapes, data.files, nireq, layout=o.layout, **data.feeding)
    batch = data.batch
    planned = bench.planned_iterations(o.niter, nireq, mode.api)
    if planned != o.niter:
        info(f"Number of iterations rounded up to {planned} for {nireq} infer requests")
    step(10, f"Measuring performance ({measuring_text(mode.api, nireq, planned, duration)})")
    info("Benchmarking in inference only mode (inputs filling are not included in measurement loop).")
    if o.pcseq:
        info("-pcseq: one data shape per input here, so the latencies are one group (as benchmark_app's)")
    if mode.api == "async" and nireq > 1:
        info(
            f"{nireq} requests in flight on an AsyncInferQueue: each device runs its subgraphs on its own "
            "pipeline thread, so requests overlap across devices"
        )
    if o.max_irate:
        info(f"-max_irate: at most {o.max_irate:g} frames start per second")
    with bar(planned, duration) as on_progress:
        result = bench.measure(
            compiled, feeds, nireq=nireq, api=mode.api, niter=planned, duration_s=duration, batch=batch,
            on_progress=on_progress, warmup=not o.no_warmup, max_irate=o.max_irate,
            percentile=o.latency_percentile,
        )  # fmt: skip
    if o.no_warmup:
        info("Skipping warmup inference due to -no_warmup flag")
    else:
        info(f"First inference took {result.first_inference_ms:.2f} ms")
    per_request: list[list[Any]] = []
    history: list[list[Any]] = []
    timelines: list[Any] = []
    if counters:
        per_request, history, timelines = _profile(setup, feeds, nireq, everywhere=counted_everywhere)
    step(11, "Dumping statistics report")
    _write_files(o, compiled)
    if perf_counts or o.pcsort:
        print_counters(compiled, per_request, o.pcsort, timelines)
    print_statistics(compiled, result)
    if report_type:
        _statistics(
            o, report_type, given, setup, compiled, mode.api, batch=batch, niter=planned, nireq=nireq,
            duration_ms=int((duration or 0) * 1000), times=(read_ms, compile_ms),
            results=result_rows(result, nireq), pcsort=o.pcsort, per_request=per_request,
            average=bench.average_counters(history) if history else [],
        )  # fmt: skip
    return bench.summary(compiled, result, hint=mode.hint, read_ms=read_ms, compile_ms=compile_ms)


def _statistics(
    o: SimpleNamespace,
    report_type: str,
    given: Any,
    setup: Setup,
    compiled: CompiledModel,
    api: str,
    *,
    batch: int,
    niter: int,
    nireq: int,
    duration_ms: int,
    times: tuple[float, float],
    results: Sequence[tuple[str, Any]],
    **counters: Any,
) -> None:
    """benchmark_app's statistics reports of this run (write_statistics): the command line ``given``, the
    configuration it ran with, the read and compile ``times`` (ms) then ``results``; ``counters`` as
    write_reports takes them (pcsort, per_request, average)."""
    configuration = bench.configuration_setup(
        compiled, topology=setup.model.name, api=api, inference_only=True, batch_size=batch, niter=niter,
        nireq=nireq, duration_ms=duration_ms, precision=o.infer_precision or "UNSPECIFIED",
    )  # fmt: skip
    rows = [("read model time (ms)", times[0]), ("compile model time (ms)", times[1]), *results]
    write_statistics(
        o.report_folder or ".", report_type, json_stats=bool(o.json_stats), parameters=given,
        configuration=configuration, results=rows, **counters,
    )  # fmt: skip


def _device_options(setup: Setup, o: SimpleNamespace) -> None:
    """-cdir, -nthreads, -nstreams and -infer_precision as HETERO's and the devices' properties (step 3)."""
    if o.cache_dir is not None:
        setup.core.set_property({cfg.CACHE_DIR: o.cache_dir})
        info(f"-cdir {o.cache_dir}: {cfg.CACHE_DIR}={o.cache_dir}")
    devices = list(setup.request.priorities)
    names = [d.name for d in devices]
    if o.nthreads is not None:
        threaded = [d.name for d in devices if d.kind.family in ("CPU", "OPENVINO")]
        if not threaded:
            raise BenchmarkError(
                f"-nthreads sets INFERENCE_NUM_THREADS of CPU and OPENVINO devices, and -d {setup.device} has "
                f"none: leave it out, or give the device's own options with --config"
            )
        for name in threaded:
            setup.core.set_property(name, {cfg.NUM_THREADS: o.nthreads})
        info(f"-nthreads {o.nthreads}: {cfg.NUM_THREADS}={o.nthreads} for {', '.join(threaded)}")
    if o.nstreams is not None:
        values = bench.per_device(o.nstreams, names, "-nstreams")
        if ":" not in o.nstreams:  # N: every OPENVINO device of -d
            values = {n: v for n, v in values.items() if registry.lookup(n).kind.family == "OPENVINO"}
        for name in values:
            if registry.lookup(name).kind.family != "OPENVINO":
                raise BenchmarkError(
                    f"-nstreams {name}: streams are the OpenVINO EP's (num_streams); {name} runs one inference "
                    "per request at a time: give -nireq for requests in flight"
                )
        if not values:
            raise BenchmarkError(
                f"-nstreams sets the OpenVINO EP's num_streams, and -d {setup.device} has no OPENVINO device: "
                "give -nireq for requests in flight"
            )
        for name, value in values.items():
            setup.core.set_property(name, {"num_streams": value})
        info(f"-nstreams: num_streams {', '.join(f'{n}={v}' for n, v in values.items())}")
    if o.infer_precision is not None:
        for name, value in bench.per_device(o.infer_precision, names, "-infer_precision").items():
            setup.core.set_property(name, {cfg.PRECISION: value})


def _input_data(model: Model, o: SimpleNamespace, nireq: int) -> SimpleNamespace:
    """Steps 5 and 6: the -i files per input, each input's data shape, the batch size, and how the data is
    made (-ip / -iop types, --mean_values / --scale_values), printed and checked before anything compiles.
    Returns files, shapes, batch and feeding (input_sets' keywords)."""
    names = [i.name for i in model.inputs]
    files = bench.parse_input_files(o.inputs, names)
    shapes, filled = bench.file_data_shapes(
        model,
        files,
        o.shape,
        o.data_shape,
        nireq,
        layout=o.layout,
        batch=o.batch,
        fill_dynamic=o.fill_dynamic,
    )
    for note in filled:
        info(note.text)
    batch = bench.batch_size(shapes)
    info(f"Model batch size: {batch}")
    step(6, "Configuring input of the model")
    bench.check_random_data(model, files)  # before anything is compiled or written
    given, ranges = int_ranges(model, o.int_range, files)
    made_as = bench.element_types(model, o.input_precision, o.output_precision, o.input_output_precision)
    mean = bench.per_input_values(o.mean_values, names, "--mean_values")
    scale = bench.per_input_values(o.scale_values, names, "--scale_values")
    images = [n for n, paths in files.items() if paths and Path(paths[0]).suffix.lower() in IMAGE_SUFFIXES]
    bench.check_image_values(mean, images, "--mean_values")
    bench.check_image_values(scale, images, "--scale_values")
    for name, dims in shapes.items():
        source = "seeded random values"
        if name in files:
            read = bench.files_read(dims, files[name], nireq)
            source = f"{read} file(s)"
            if read < len(files[name]):
                source = f"{read} of {len(files[name])} file(s)"
                warn(
                    f"-i gives {name!r} {len(files[name])} file(s) and {nireq} infer request(s) read the first "
                    f"{read}, as benchmark_app does: the others are not read (-api async -nireq N reads more)"
                )
        if name in ranges:
            source += f", {ranges[name]}"
        if name in made_as and name not in files:
            source += f" made as {made_as[name]}, converted to the input's own type"
        info(f"    {name}: data {shape_text(dims)} from {source}")
    feeding = {"made_as": made_as, "mean": mean, "scale": scale, "int_ranges": given}
    return SimpleNamespace(files=files, shapes=shapes, batch=batch, feeding=feeding)


def _write_files(o: SimpleNamespace, compiled: CompiledModel) -> None:
    """-dump_config and -exec_graph_path's files; a later failure removes them (``written``)."""
    for path, doc, what in (
        (o.dump_config, lambda: bench.config_document(compiled), "Configuration"),
        (o.exec_graph_path, lambda: bench.exec_graph(compiled), "Compiled plan (subgraphs, devices, links)"),
    ):
        if path:
            write_json(path, doc())
            info(f"{what} written to {path}")


def _profile(
    setup: Setup, feeds: Sequence[Mapping[str, np.ndarray]], nireq: int, *, everywhere: bool
) -> tuple[list[Any], list[Any], list[Any]]:
    """Counters from a second, profiled compile, PROFILED_RUNS inferences per request, after the loop,
    and each request's last inference's timeline (when each subgraph ran).

    The measured loop runs without the profiler (unless a config turned PERF_COUNT on for it), so -pc does
    not change the numbers it reports. ``everywhere`` (-pc, -pcsort, a counters report) profiles every
    device's subgraphs; else the config's PERF_COUNT stands, so a device's own PERF_COUNT=YES counts only
    that device's subgraphs.
    """
    info(
        "Compiling the model a second time, with PERF_COUNT=YES, to collect the performance counters (the "
        f"measured loop ran without the profiler): {PROFILED_RUNS} profiled inferences per infer request"
    )
    if everywhere:
        setup.core.set_property("HETERO", {cfg.PERF_COUNT: "YES"})
    with busy("Compiling the model with the profiler on"):
        profiled = setup.core.compile_model(setup.model, setup.device)
    per_request, history = [], []
    requests = [profiled.create_infer_request() for _ in range(nireq)]
    with busy("Running the profiled inferences"):
        for k, request in enumerate(requests):
            for _ in range(PROFILED_RUNS):
                request.infer(feeds[k % len(feeds)])
    # read once every request has run: the first read ends ONNX Runtime's trace (runtime.profiling)
    timelines = [request.get_timeline() for request in requests]
    for request in requests:
        per_request.append(request.get_profiling_info())
        history += request.get_profiling_history()[1:]  # the first profiled run is a warm-up
    return per_request, history, timelines
