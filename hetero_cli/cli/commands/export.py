"""``hetero export``: a split written for a serving engine: a Triton model repository (--format triton) or
the subgraphs' .onnx files with a JSON manifest (--format onnx)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ...app import export as exporting
from ...placement import config as cfg
from ..files import check_writable
from ..options import named, shared, shared_options
from ..output import info
from ..progress import busy
from ..runner import CONTEXT, Command
from ..setup import compile_setup, prepare


@click.command(
    cls=Command,
    context_settings=CONTEXT,
    short_help="Write the split as a Triton repository, or .onnx files.",
)
@click.option("-m", "model", metavar="MODEL", help="ONNX model (default: models/digits.onnx).")
@click.option("-d", "device", required=True, metavar="DEVICE", help="HETERO:<dev>,<dev>,... or one device.")
@click.option(
    "--format",
    "fmt",
    required=True,
    type=click.Choice(list(exporting.FORMATS), case_sensitive=False),
    help="triton: a Triton model repository (an ensemble over one model per subgraph); onnx: the "
    "subgraphs' .onnx files and manifest.json.",
)
@click.option("-o", "out", required=True, metavar="DIR", callback=named, help="The folder to write.")
@click.option("--force", is_flag=True, help="Replace the content of a -o folder that is not empty.")
@click.option(
    "--name", metavar="NAME", help="The served model's name (default: the model file's stem, digits)."
)
@click.option(
    "-shape",
    "shape",
    metavar="SHAPE",
    help="Set dynamic dimensions of the model's inputs in what is written: [1,1,32,32] or name[1,1,32,32],...",
)
@click.option("-data_shape", "data_shape", metavar="SHAPE", help="As -shape (benchmark's grammar).")
@shared_options
def export(
    model: str | None,
    device: str,
    fmt: str,
    out: str,
    force: bool,
    name: str | None,
    shape: str | None,
    data_shape: str | None,
    **options: Any,
) -> None:
    """Compile MODEL on DEVICE and write the split into DIR for a serving engine.

    \b
      hetero export -m models/digits.onnx -d HETERO:OPENVINO,CPU --affinity softmax=CPU --format triton -o repo
      hetero export -m model.onnx -d HETERO:GPU,CPU --format onnx -o split
    """
    fmt = exporting.check_format(fmt)
    served = exporting.served_name(name, given=True) if name is not None else None
    check_writable(out, "-o", folder=True)
    setup = prepare(model, device, feeds=False, **shared(options))
    keep = (setup.model_path, Path.cwd())
    exporting.check_output_folder(Path(out), force=force, keep=keep)
    shapes = exporting.export_shapes(setup.model, shape, data_shape)
    served = served or exporting.served_name(setup.model_path.stem)
    # one session per subgraph, as the serving engine runs them: HETERO_FALLBACK and the type repairs
    # act on each subgraph as it will run there
    setup.core.set_property("HETERO", {cfg.PERFORMANCE_HINT: "THROUGHPUT"})
    info(f"Compiling for {setup.request}")
    with busy("Compiling the model (each subgraph in a session of its own)"):
        compiled = compile_setup(setup)
    with busy(f"Writing {out}"):
        split = exporting.export_split(
            compiled, fmt, Path(out), name=served, shapes=shapes, force=force, keep=keep
        )
    _report(split, fmt, Path(out))


def _report(split: exporting.Split, fmt: str, out: Path) -> None:
    """What was written, and how to use it."""
    if fmt == "triton":
        info(
            f"Wrote the Triton model repository {out}: ensemble {split.name!r} over {len(split.members)} model(s)"
        )
        for member in split.members:
            info(f"  {out / exporting.triton_name(split, member)}: {member.label} on {member.device.name}")
        info(f"Serve it with: tritonserver --model-repository={out.absolute()}")
    else:
        info(f"Wrote {len(split.members)} subgraph file(s) and {out / 'manifest.json'}")
