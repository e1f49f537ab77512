"""benchmark_app's command line on click: every option of OpenVINO's benchmark_app (2026.4) accepted with
its meaning, or refused in one line that says what to use instead; never one option read as another's value.

click reads an unknown ``-max_irat`` as the short option ``-m`` with the value ``ax_irat`` (short options
cluster). ``BenchmarkAppCommand`` reads the command line first, as benchmark_app's argparse does: each
single-dash word is a whole option name (``-max_irate``, ``-nireq``), an unknown one is refused by its own
name; benchmark_app's long forms (``--path_to_model``) are click aliases; ``-pc``, ``-json_stats``,
``-inference_only`` and ``-pcseq`` take an optional true / false as there; ``-i a.png b.png`` takes several
values after one ``-i``; options hetero-cli cannot honour stop the command with the reason.

    @click.command(cls=BenchmarkAppCommand)
    @benchmark_app_options
    def benchmark(**options): ...
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from typing import Any

import click

from .floats import FiniteFloat
from .options import int_range_option, named
from .runner import Command

#: Options of benchmark_app that hetero-cli refuses, with the reason and what to use instead.
REFUSED = {
    "-pin": "ONNX Runtime's execution providers take no thread pinning option here: pin the process "
    "with taskset or numactl instead",
    "-lfile": "hetero-cli always reads the ONNX model that -m names itself: leave it out",
    "-extensions": "hetero-cli loads no custom-operation libraries: use a model of standard ONNX operators",
    "-c": "GPU custom kernels (clDNN .xml) are OpenVINO GPU plugin files, which ONNX Runtime's "
    "execution providers do not take: leave it out",
}

#: benchmark_app's long forms of the refused options.
REFUSED_LONG = {
    "--infer_threads_pinning": "-pin",
    "--load_from_file": "-lfile",
    "--extensions": "-extensions",
    "--path_to_cldnn_config": "-c",
}

#: Options whose value benchmark_app makes optional (``-pc`` alone is ``-pc true``).
OPTIONAL_BOOLS = frozenset(
    {
        "-pc",
        "--perf_counts",
        "-json_stats",
        "--json_stats",
        "-inference_only",
        "--inference_only",
        "-pcseq",
        "--pcseq",
    }
)
BOOL_WORDS = frozenset({"yes", "true", "t", "y", "1", "no", "false", "f", "n", "0"})
MULTI_VALUE = frozenset({"-i", "--paths_to_input"})  # argparse's nargs="+"

#: -hint's values: benchmark_app's names and aliases, in any case, to the PERFORMANCE_HINT they set.
HINTS = {
    "throughput": "throughput",
    "tput": "throughput",
    "cumulative_throughput": "cumulative_throughput",
    "ctput": "cumulative_throughput",
    "latency": "latency",
    "none": "none",
}
PRECISIONS = ("bool", "f16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")


def parse_bool(value: str, option: str) -> bool:
    """benchmark_app's str2bool: yes/true/t/y/1 or no/false/f/n/0 in any case; a usage error otherwise."""
    word = str(value).strip().lower()
    if word not in BOOL_WORDS:
        raise click.BadParameter(f"{value!r} is not a boolean: give true or false", param_hint=option)
    return word in ("yes", "true", "t", "y", "1")


def _hint(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """-hint's value as a PERFORMANCE_HINT name (lower case): benchmark_app's names and aliases."""
    if value is None:
        return None
    hint = HINTS.get(value.strip().lower())
    if hint is None:
        raise click.BadParameter(
            f"{value!r} is not a hint: give {', '.join(HINTS)} (any case)", param_hint="-hint"
        )
    return hint


def _flag(ctx: click.Context, param: click.Parameter, value: str | None) -> bool | None:
    return None if value is None else parse_bool(value, param.opts[0])


def _layout(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--layout NCHW, or benchmark_app's -layout [NCHW] / name[NCHW] (one layout for the image inputs)."""
    if value is None:
        return None
    text = value.strip()
    if "[" in text:
        inner = text[text.index("[") + 1 : text.rindex("]")] if text.endswith("]") else ""
        if text.count("[") != 1 or not inner:
            raise click.BadParameter(
                f"{value!r}: give one layout for the image inputs, [NCHW] or [NHWC] (a layout per input "
                "is not supported)",
                param_hint="-layout",
            )
        text = inner
    if text.upper() not in ("NCHW", "NHWC"):
        raise click.BadParameter(f"{value!r}: give NCHW or NHWC", param_hint="-layout")
    return text.upper()


def _names(command: click.Command, ctx: click.Context) -> dict[str, click.Parameter]:
    return {
        name: p
        for p in command.get_params(ctx)
        if isinstance(p, click.Option)
        for name in (*p.opts, *p.secondary_opts)
    }


def _takes_value(param: click.Parameter) -> bool:
    return isinstance(param, click.Option) and not param.is_flag and not param.count


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _did_you_mean(name: str, names: dict[str, click.Parameter]) -> str:
    """`` (did you mean -max_irate?)`` for a misspelt option; `` (did you mean -m VALUE?)`` for a value
    glued to a short option (``-mmodel.onnx``), which click would take but benchmark_app's names forbid."""
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.75)
    if close:
        return f" (did you mean {close[0]}?)"
    short = names.get(name[:2])
    if short is not None and _takes_value(short) and not name.startswith("--"):
        return f" (did you mean {name[:2]} {name[2:]}?)"
    close = difflib.get_close_matches(name, list(names), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def normalize(args: Sequence[str], command: click.Command, ctx: click.Context) -> list[str]:
    """benchmark_app's command line as click reads it: ``-name=value`` split, optional booleans given
    their value, several -i values split, refused and unknown options raised as click.UsageError by their
    whole name; every other word as given."""
    names = _names(command, ctx)
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            out += args[i - 1 :]
            break
        if not arg.startswith("-") or arg == "-" or _is_number(arg):
            out.append(arg)
            continue
        name, eq, value = arg.partition("=")
        name = REFUSED_LONG.get(name, name)
        if ctx.resilient_parsing and (name in REFUSED or name not in names):  # shell completion
            out.append(arg)
            continue
        if name in REFUSED:
            raise click.UsageError(f"{name} is not supported: {REFUSED[name]}", ctx)
        param = names.get(name)
        if param is None:
            raise click.UsageError(f"No such option '{name}'{_did_you_mean(name, names)}", ctx)
        if name in OPTIONAL_BOOLS and not eq:
            if i < len(args) and args[i].strip().lower() in BOOL_WORDS:
                value, i = args[i], i + 1
            elif i < len(args) and not args[i].startswith("-"):
                raise click.UsageError(f"{name} takes true or false (or nothing), not {args[i]!r}", ctx)
            else:
                value = "true"
            eq = "="
        if eq:
            out += [name, value]
        elif _takes_value(param):
            if i >= len(args):
                raise click.UsageError(f"Option '{name}' requires an argument", ctx)
            out += [name, args[i]]
            i += 1
        else:
            out.append(name)
        while name in MULTI_VALUE and i < len(args) and not args[i].startswith("-"):
            out += [name, args[i]]
            i += 1
    return out


class BenchmarkAppCommand(Command):
    """A hetero-cli command that reads its command line as benchmark_app does (``normalize``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """click's parsing of ``args`` after ``normalize``."""
        return super().parse_args(ctx, normalize(args, self, ctx))


def benchmark_app_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command with benchmark_app's options, in its groups and order, long forms as aliases."""
    opt = click.option
    decorators = [
        opt("-m", "--path_to_model", "model", metavar="MODEL", help="ONNX model (default: models/digits.onnx)."),
        opt("-d", "--target_device", "device", default="CPU", show_default=True, metavar="DEVICE",
            help="CPU, OPENVINO, GPU or HETERO:... (HETERO alone: the priorities of --config)."),
        opt("-i", "--paths_to_input", "inputs", multiple=True, metavar="[NAME:]FILE",
            help="Input data: images, .npy or raw binary files, or folders of them; several after one -i "
            "(seeded random data otherwise)."),
        opt("-hint", "--perf_hint", "hint", metavar="HINT", callback=_hint,
            help="latency (-api sync), throughput / tput, cumulative_throughput / ctput, none; any case. "
            "Default: THROUGHPUT on one device, LATENCY on HETERO (as OpenVINO's HETERO, step 3 says)."),
        opt("-niter", "--number_iterations", "niter", type=click.IntRange(min=0),
            help="Number of iterations (0: compile the model and stop, no data shapes needed)."),
        opt("-max_irate", "--maximum_inference_rate", "max_irate", type=FiniteFloat(min=0),
            default=0.0, help="Start at most this many frames per second (0: as fast as the devices go)."),
        opt("-t", "--time", "time_s", type=click.IntRange(min=1),
            help="Seconds to run (default 60 when -niter is not given)."),
        opt("-b", "--batch_size", "batch", type=click.IntRange(min=1),
            help="Batch: dimension 0 of every input of rank >= 2, set as -shape sets it (dynamic ones only)."),
        opt("-shape", "shape", metavar="SHAPE",
            help="Fill dynamic dimensions: [1,1,32,32] or name[1,1,32,32],... (? or -1 keeps one dynamic)."),
        opt("-data_shape", "data_shape", metavar="SHAPE", help="Shape of the data for dynamic inputs."),
        opt("-layout", "--layout", "layout", metavar="LAYOUT", callback=_layout,
            help="Layout of image inputs: NCHW or NHWC ([NCHW] as benchmark_app writes it)."),
        opt("--fill-dynamic", "fill_dynamic", is_flag=True,
            help="Set dynamic dimensions that no -shape, -data_shape, -b or -i gives to 1 (else refused)."),
        int_range_option,
        opt("-api", "--api_type", "api", type=click.Choice(["sync", "async"], case_sensitive=False),
            help="sync: one request, each inference timed alone; async: -nireq in flight. Default: sync for "
            "-hint latency, else async."),
        opt("-nireq", "--number_infer_requests", "nireq", type=click.IntRange(min=1),
            help="Number of infer requests (default: 1 for latency, the compiled model's "
            "OPTIMAL_NUMBER_OF_INFER_REQUESTS on HETERO, else 2 to 4 by cores)."),
        opt("-nstreams", "--number_streams", "nstreams", metavar="[DEVICE:]N,...",
            help="Streams of the OpenVINO EP (its num_streams): N for every OPENVINO device, or OPENVINO:N."),
        opt("-inference_only", "--inference_only", "inference_only", metavar="[BOOL]", callback=_flag,
            help="true (the only mode here): inputs are filled once, before the measured loop."),
        opt("-no_warmup", "no_warmup", is_flag=True, help="Skip the first, unmeasured inference."),
        opt("-infer_precision", "infer_precision", metavar="[DEVICE:]PRECISION,...",
            help="INFERENCE_PRECISION_HINT: f32 or f16 (OpenVINO EP), for every device or DEVICE:f16,..."),
        opt("-ip", "--input_precision", "input_precision", type=click.Choice(PRECISIONS),
            help="Element type the input data is made in, then converted to each input's own type."),
        opt("-op", "--output_precision", "output_precision", type=click.Choice(PRECISIONS),
            help="Element type of the outputs: accepted where it is the model's own (ONNX Runtime returns "
            "those)."),
        opt("-iop", "--input_output_precision", "input_output_precision", metavar="NAME:TYPE,...",
            help="-ip / -op per input or output name, e.g. -iop image:u8."),
        opt("--mean_values", "mean_values", metavar="[R,G,B]",
            help="Mean subtracted from the -i images' pixels: [R,G,B] or name[R,G,B],... (as classify --mean)."),
        opt("--scale_values", "scale_values", metavar="[R,G,B]",
            help="Scale the -i images' pixels are divided by, after the mean (as classify --scale)."),
        opt("-cdir", "--cache_dir", "cache_dir", metavar="DIR", callback=named,
            help="Keep the compiled split in DIR (CACHE_DIR): a later run with the same model, device and "
            "config loads it instead of compiling."),
        opt("-nthreads", "--number_threads", "nthreads", type=click.IntRange(min=1),
            help="INFERENCE_NUM_THREADS of every CPU and OPENVINO device of -d."),
        opt("-latency_percentile", "--latency_percentile", "latency_percentile",
            type=click.IntRange(1, 100), default=50, show_default=True,
            help="The latency percentile reported (50: the median)."),
        opt("-report_type", "--report_type", "report_type",
            type=click.Choice(["no_counters", "average_counters", "detailed_counters"]),
            help="Write benchmark_app's CSV reports."),
        opt("-report_folder", "--report_folder", "report_folder", metavar="DIR", callback=named,
            help="Folder for the reports (default: here); alone, it writes the no_counters report."),
        opt("-json_stats", "--json_stats", "json_stats", metavar="[BOOL]", callback=_flag,
            help="Write the reports as JSON instead of CSV; alone, the no_counters report."),
        opt("-pc", "--perf_counts", "perf_counts", metavar="[BOOL]", callback=_flag,
            help="Print performance counters per infer request (from a second, profiled compile)."),
        opt("-pcsort", "--perf_counts_sort", "pcsort", type=click.Choice(["sort", "no_sort", "simple_sort"]),
            help="Print the counters as a table: sort (by real time), no_sort, simple_sort (only the executed)."),
        opt("-pcseq", "--pcseq", "pcseq", metavar="[BOOL]", callback=_flag,
            help="Latencies per -data_shape group: one group here (one data shape per input)."),
        opt("-exec_graph_path", "--exec_graph_path", "exec_graph_path", metavar="FILE", callback=named,
            help="Write the compiled plan as JSON: subgraphs, their devices, and the links between them."),
        opt("-dump_config", "dump_config", metavar="FILE", callback=named,
            help="Write the configuration used as JSON {device: {key: value}}."),
        opt("--json", "json_summary", is_flag=True,
            help="Print a JSON summary of the run on stdout (the steps go to stderr), for scripts."),
    ]  # fmt: skip
    for decorator in reversed(decorators):
        func = decorator(func)
    return func
