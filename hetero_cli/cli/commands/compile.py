"""``hetero compile``: compile a model for a device string and write the export (OpenVINO's compile_tool),
for ``hetero benchmark -m OUT`` (and the other commands, and Core.import_model) to load without compiling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ...app.benchmark import input_dims
from ...graph import shape_text, with_input_shapes
from ..files import check_writable
from ..options import named, shared, shared_options
from ..output import info
from ..progress import busy
from ..runner import CONTEXT, Command, written
from ..setup import compile_setup, prepare


@click.command(
    cls=Command,
    context_settings=CONTEXT,
    short_help="Compile a model and write the export (compile_tool).",
)
@click.option(
    "-m", "model", required=True, metavar="MODEL", help="ONNX model (or an export, compiled again)."
)
@click.option("-d", "device", required=True, metavar="DEVICE", help="HETERO:<dev>,<dev>,... or one device.")
@click.option(
    "-o",
    "output",
    metavar="OUT",
    callback=named,
    help="The export to write (default: MODEL's name with .hetero, in the current folder).",
)
@click.option(
    "-shape",
    "shape",
    metavar="SHAPE",
    help="Fix the export's dynamic input dimensions: [1,3,224,224] or name[1,3,224,224],... (? or -1 keeps "
    "one dynamic), as hetero benchmark takes it.",
)
@click.option("-data_shape", "data_shape", metavar="SHAPE", help="As -shape (it wins where both set one).")
@shared_options
def compile_command(
    model: str, device: str, output: str | None, shape: str | None, data_shape: str | None, **options: Any
) -> None:
    """Compile MODEL for DEVICE and write the compiled split to OUT: `hetero benchmark -m OUT` (and
    query, validate, classify, tune, Core.import_model) loads it without a query or a compile.

    \b
      hetero compile -m models/digits.onnx -d HETERO:OPENVINO,CPU -shape [1,1,32,32] -o digits.hetero
      hetero compile -m model.onnx -d HETERO:OPENVINO,CPU --affinity softmax=CPU --config PERFORMANCE_HINT=THROUGHPUT
      hetero compile -m dynamic.onnx -d HETERO:OPENVINO,CPU -shape [1,3,224,224] -o fixed.hetero
      hetero benchmark -m digits.hetero -niter 100
    """
    out = Path(output) if output else Path(Path(model).stem + ".hetero")
    check_writable(str(out), "-o", folder=False)
    setup = prepare(model, device, feeds=False, **shared(options))
    setup.check_not_read(out, "-o")
    if shape or data_shape:
        fixed = input_dims(setup.model, shape, data_shape)
        setup.model = with_input_shapes(setup.model, fixed)
        for name, dims in fixed.items():
            info(f"  input {name!r}: {shape_text(dims)}")
    with busy("Compiling the model (and querying the devices for the automatic placement)"):
        compiled = compile_setup(setup)
    written().before_writing(out, folder=False)
    # its folders created, as every other output's (a later failure removes them)
    out.absolute().parent.mkdir(parents=True, exist_ok=True)
    compiled.export_model(out)
    written().wrote(out)
    info(
        f"Wrote {out} ({out.stat().st_size} bytes): {len(compiled.subgraphs)} subgraph(s) on {compiled.device_name}"
    )
