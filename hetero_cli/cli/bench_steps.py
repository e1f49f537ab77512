"""What ``hetero benchmark`` prints and applies at its steps, in benchmark_app's words: the model's inputs
and outputs (step 4), the runtime parameters (8), the measuring header (10), the statistics, counters and
reports (11), and the hint applied to the configuration (3)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from ..app import benchmark as bench
from ..core import Core
from ..graph import Model, shape_text
from ..placement import config as cfg
from ..placement import devices as registry
from ..runtime import CompiledModel, Timeline, counter_tables, format_counters, subgraph_summaries
from .output import info
from .runner import written
from .setup import Setup


def given_on_command_line(ctx: click.Context) -> list[tuple[str, Any]]:
    """(option, value) for each option given on the command line: the reports' command line parameters."""
    return [
        (p.opts[0], ctx.params[p.name])
        for p in ctx.command.params
        if p.name in ctx.params and ctx.get_parameter_source(p.name) == click.core.ParameterSource.COMMANDLINE
    ]


def print_io(model: Model) -> None:
    """Step 4: the model's inputs and outputs with their types and shapes."""
    for title, tensors in (("Model inputs:", model.inputs), ("Model outputs:", model.outputs)):
        info(title)
        for t in tensors:
            info(f"    {t.name} : {t.dtype} / {shape_text(t.shape)}")


def print_runtime_parameters(compiled: CompiledModel, nireq: int) -> None:
    """Step 8: the compiled model's devices, subgraph count, hint and the requests the run uses."""
    info("Model:")
    info(f"  EXECUTION_DEVICES: {compiled.get_property('EXECUTION_DEVICES')}")
    info(f"  HETERO_NUMBER_OF_SUBMODELS: {compiled.get_property('HETERO_NUMBER_OF_SUBMODELS')}")
    info(f"  OPTIMAL_NUMBER_OF_INFER_REQUESTS: {compiled.get_property('OPTIMAL_NUMBER_OF_INFER_REQUESTS')}")
    info(f"  PERFORMANCE_HINT: {compiled.get_property('PERFORMANCE_HINT')}")
    info(f"  HETERO_CONCURRENCY: {compiled.get_property('HETERO_CONCURRENCY')}")
    if compiled.schedule is not None and len(compiled.subgraphs) > 1:
        info(f"  schedule: {compiled.schedule.describe()}")
    info(f"  infer requests used: {nireq}")


def measuring_text(api: str, nireq: int, planned: int | None, duration: int | None) -> str:
    """Step 10's header: the mode, the requests and the limits of the measured loop, as benchmark_app's."""
    limits = []
    if planned:
        limits.append(f"{planned} iterations")
    if duration:
        limits.append(f"{duration * 1000} ms duration")
    if api == "sync":
        return f"Start inference synchronously, limits: {', '.join(limits)}"
    return f"Start inference asynchronously, {nireq} inference requests, limits: {', '.join(limits)}"


def print_counters(
    compiled: CompiledModel,
    per_request: list[list[Any]],
    pcsort: str | None,
    timelines: Sequence[Timeline] = (),
) -> None:
    """Step 11: each request's counters, as -pc prints them or as -pcsort's table, then the time per
    subgraph and per device (in -pcsort's unit) and, from its ``timelines`` entry, when each subgraph of
    its last inference ran."""
    subgraphs = subgraph_summaries(compiled.subgraphs)
    for k, infos in enumerate(per_request):
        info(f"Performance counts{' sorted' if pcsort else ''} for {k}-th infer request")
        click.echo(bench.sorted_counters(infos, pcsort) if pcsort else format_counters(infos))
        timeline = timelines[k] if k < len(timelines) else None
        click.echo(counter_tables(infos, subgraphs, unit="ms" if pcsort else "us", timeline=timeline))


def _latency_label(percentile: int) -> str:
    return "   Median:        " if percentile == 50 else f"   {percentile} percentile:     "


def print_statistics(compiled: CompiledModel, result: bench.Measurement) -> None:
    """Step 11: benchmark_app's summary of the measured loop (-latency_percentile's latency first)."""
    info(f"Execution Devices:{compiled.execution_devices}")
    info(f"Count:            {result.count} iterations")
    info(f"Duration:         {result.duration_ms:.2f} ms")
    info("Latency:")
    info(f"{_latency_label(result.percentile)}{result.latency_percentile_ms:.2f} ms")
    info(f"   Average:       {result.latency_average_ms:.2f} ms")
    info(f"   Min:           {result.latency_min_ms:.2f} ms")
    info(f"   Max:           {result.latency_max_ms:.2f} ms")
    info(f"Throughput:   {result.throughput_fps:.2f} FPS")


def result_rows(result: bench.Measurement, nireq: int) -> list[tuple[str, Any]]:
    """The measured loop's rows of benchmark_app's execution results report."""
    p = result.percentile
    return [
        ("first inference time (ms)", result.first_inference_ms),
        ("total execution time (ms)", result.duration_ms),
        ("total number of iterations", result.count),
        ("number of parallel infer requests", nireq),
        ("latency (ms)" if p == 50 else f"latency ({p} percentile) (ms)", result.latency_percentile_ms),
        ("avg latency", result.latency_average_ms),
        ("min latency", result.latency_min_ms),
        ("max latency", result.latency_max_ms),
        ("throughput", result.throughput_fps),
    ]


def write_statistics(folder: str, report_type: str, **report: Any) -> None:
    """benchmark_app's statistics reports in ``folder``; a later failure removes them (``written``)."""
    written().before_writing(Path(folder), folder=True)
    for path in bench.write_reports(folder, report_type, **report):
        written().wrote(path)
        info(f"Statistics report is stored to {path}")


def profiling_configured(setup: Setup) -> bool:
    """Whether --config or -load_config set PERF_COUNT=YES for HETERO or for a device of the request."""
    devices = ["HETERO", *(dev.name for dev in setup.request.priorities)]
    return any(
        cfg.parse_bool(cfg.PERF_COUNT, configured(setup.core, cfg.PERF_COUNT, d) or "NO") for d in devices
    )


def configured(core: Core, key: str, device: str = "HETERO") -> str | None:
    """``device``'s property ``key`` as --config or -load_config set it (lower case), or None."""
    value = core.configured(device, key)
    return None if value is None else str(value).lower()


def apply_hint(setup: Setup, hint: str, nireq: int) -> None:
    """The hint as HETERO's PERFORMANCE_HINT (none: none set, HETERO's LATENCY stands); a throughput hint
    with several requests also shares the cores between them, unless threads were set."""
    if hint != "none":
        setup.core.set_property("HETERO", {cfg.PERFORMANCE_HINT: hint.upper()})
    if hint not in ("throughput", "cumulative_throughput") or nireq <= 1:
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
            f"{cfg.PERFORMANCE_HINT}={hint.upper()}: {nireq} requests share {cores} cores, {cfg.NUM_THREADS}={threads} for "
            f"{', '.join(changed)}"
        )
