"""``hetero export``: a compiled split written for a serving engine. ``--format triton``: a Triton model
repository (triton.py); ``--format onnx``: the subgraphs' .onnx files and a JSON manifest
(onnx_manifest.py). Both are written whole or not at all (folder.py).

    compiled = Core().compile_model(model, "HETERO:OPENVINO,CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    split = export_split(compiled, "triton", Path("repo"), name="digits")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ...errors import ExportError
from ...graph import Model
from ...runtime import CompiledModel
from ..benchmark.shapes import data_shapes
from .folder import check_output_folder, write_folder
from .members import Dim, Split, served_name, split_of
from .onnx_manifest import read_manifest, write_manifest
from .triton import member_name as triton_name
from .triton import write_repository

#: --format's values, and what each writes
FORMATS = {
    "triton": write_repository,
    "onnx": write_manifest,
}

__all__ = [
    "FORMATS",
    "ExportError",
    "Split",
    "check_format",
    "check_output_folder",
    "export_shapes",
    "export_split",
    "read_manifest",
    "served_name",
    "split_of",
    "triton_name",
]


def check_format(fmt: str) -> str:
    """``fmt`` in lower case where it is one of FORMATS; ExportError naming them otherwise."""
    key = str(fmt).strip().lower()
    if key not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r}: give {' or '.join(FORMATS)}")
    return key


def export_shapes(model: Model, shape: str | None, data_shape: str | None) -> dict[str, tuple[Dim, ...]]:
    """{model input: dims} as -shape and -data_shape set them (benchmark's grammar and checks): the
    dynamic dimensions they give become sizes, the others stay dynamic. {} where neither is given.
    Raises BenchmarkError for a shape benchmark would refuse (a fixed dimension changed, a wrong rank)."""
    if not shape and not data_shape:
        return {}
    concrete, filled = data_shapes(model, shape, data_shape)
    partly = {f.input: tuple(f.given) for f in filled}  # dimensions left dynamic stay so
    declared = {i.name: tuple(i.shape or ()) for i in model.inputs}
    dims = {name: partly.get(name, tuple(sizes)) for name, sizes in concrete.items()}
    return {name: d for name, d in dims.items() if d != declared[name]}


def export_split(
    compiled: CompiledModel,
    fmt: str,
    out: Path,
    *,
    name: str,
    shapes: Mapping[str, Sequence[Dim]] | None = None,
    force: bool = False,
    keep: Sequence[Path] = (),
) -> Split:
    """Write ``compiled`` (a CompiledModel) in format ``fmt`` into the folder ``out``, served as ``name``;
    ``shapes`` as export_shapes gives them. Returns the Split written. Raises ExportError for an unknown
    format, an output folder that exists and is not empty (unless ``force``; never one holding a path of
    ``keep``), or a split the format cannot carry; nothing is left behind then."""
    write = FORMATS[check_format(fmt)]
    split = split_of(compiled, name=served_name(name, given=True), shapes=shapes)
    write_folder(out, lambda folder: write(split, folder), force=force, keep=keep)
    return split
