"""The ``hetero`` group of commands and the console scripts (pyproject's [project.scripts]): ``hetero``,
``hello_classification`` (= ``hetero classify``) and ``hello_query_device`` (= ``hetero devices``)."""

from __future__ import annotations

import platform

import click

from .. import __version__
from ..runtime import runtime_versions
from .commands.benchmark import benchmark
from .commands.classify import classify
from .commands.compile import compile_command
from .commands.devices import devices
from .commands.export import export
from .commands.query import query
from .commands.serve import serve
from .commands.tune import tune
from .commands.validate import validate
from .options import debug_option
from .runner import CONTEXT, Group


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """--version: hetero-cli's, then ONNX Runtime's with its execution providers and the OpenVINO inside."""
    if not value or ctx.resilient_parsing:
        return
    click.echo(f"hetero-cli {__version__}")
    for name, version in runtime_versions().items():
        click.echo(f"{name}: {version}")
    click.echo(f"python: {platform.python_version()} ({platform.machine()})")
    ctx.exit(0)


@click.group(cls=Group, context_settings=CONTEXT, no_args_is_help=True)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show hetero-cli's version, ONNX Runtime's with its execution providers, and OpenVINO's.",
)
@debug_option
def hetero(debug: bool) -> None:
    """Run ONNX models across devices the way OpenVINO's HETERO device does (ONNX Runtime underneath).

    DEVICE is one device (CPU, OPENVINO, GPU...) or HETERO:<dev>,<dev>,... in priority order: each node
    goes to the first listed device that supports it, unavailable devices are skipped with a warning.
    """


hetero.add_command(classify, "classify")
hetero.add_command(benchmark, "benchmark")
hetero.add_command(query, "query")
hetero.add_command(compile_command, "compile")
hetero.add_command(validate, "validate")
hetero.add_command(tune, "tune")
hetero.add_command(export, "export")
hetero.add_command(serve, "serve")
hetero.add_command(devices, "devices")

#: console script ``hello_classification``: the same command as ``hetero classify``.
hello_classification = classify
#: console script ``hello_query_device``: the same command as ``hetero devices``.
hello_query_device = devices


def main() -> None:
    """console script ``hetero``."""
    hetero.main(prog_name="hetero")


if __name__ == "__main__":  # pragma: no cover
    main()
