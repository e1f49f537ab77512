"""A split as plain ONNX files and a JSON manifest, for engines other than Triton (the schema:
docs/serving.md, "The ONNX manifest").

    out/
      manifest.json                   the subgraphs, their devices, tensors, links and the model's I/O
      subgraph1_OPENVINO.onnx         one standalone model per subgraph, its weights inside
      subgraph2_CPU.onnx
      constants/<k>.npy               outputs the model serves without a session (its constants)

``read_manifest`` reads one back (what ``write_manifest`` wrote: the round trip is exact).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ExportError
from .folder import save_onnx
from .members import Split, TensorSpec

MANIFEST = "manifest.json"
FORMAT = "hetero-cli-split"
VERSION = 1


def write_manifest(split: Split, folder: Path) -> list[Path]:
    """Write ``split``'s subgraph models, constant outputs and manifest.json into ``folder`` (which exists
    and is empty); returns the files written."""
    written = []
    for member in split.members:
        written.append(save_onnx(member.model(), folder / _file(member.label, member.device.name)))
    constant_files = {}
    for k, name in enumerate(n for n, s in split.sources.items() if s == "constant"):
        path = folder / "constants" / f"{k}.npy"
        path.parent.mkdir(exist_ok=True)
        np.save(path, split.constants[name], allow_pickle=False)
        constant_files[name] = path.relative_to(folder).as_posix()
        written.append(path)
    doc = manifest_of(split, constant_files)
    path = folder / MANIFEST
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return [*written, path]


def manifest_of(split: Split, constant_files: Mapping[str, str]) -> dict[str, Any]:
    """The manifest's JSON document of ``split``; ``constant_files``: {constant output: its .npy file}."""
    label = {m.index: m.label for m in split.members}
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": split.name,
        "device": split.device,
        "inputs": [_tensor(t) for t in split.inputs],
        "outputs": [
            {**_tensor(t), **_source(split.sources.get(t.name), label, constant_files.get(t.name))}
            for t in split.outputs
        ],
        "subgraphs": [
            {
                "name": m.label,
                "device": m.device.name,
                "execution_provider": m.device.ep,
                "provider_options": dict(m.device.provider_options),
                "file": _file(m.label, m.device.name),
                "inputs": [_tensor(t) for t in m.inputs],
                "outputs": [_tensor(t) for t in m.outputs],
            }
            for m in split.members
        ],
        "links": [
            {
                "tensor": link.tensor,
                "from": None if link.producer is None else label[link.producer],
                "to": [label[c] for c in link.consumers],
            }
            for link in split.links
        ],
    }


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest in ``folder`` (a folder ``write_manifest`` wrote), checked: its format and version,
    and every subgraph file it names present. Raises ExportError saying what is wrong."""
    path = Path(folder) / MANIFEST
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ExportError(
            f"cannot read {path}: {exc}: give a folder `hetero export --format onnx` wrote"
        ) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise ExportError(f"{path} is no {FORMAT} manifest of version {VERSION}")
    for sub in doc["subgraphs"]:
        if not (Path(folder) / sub["file"]).is_file():
            raise ExportError(f"{path} names {sub['file']}, which is missing beside it")
    return doc


def _file(label: str, device: str) -> str:
    return f"{label}_{device.replace('.', '_')}.onnx"


def _tensor(t: TensorSpec) -> dict[str, Any]:
    """A tensor's entry: name, type ("tensor", or onnx's kind of value: "sequence", "map"...), and for a
    tensor its dtype (numpy's name) and shape (sizes; a dynamic dimension's name, or null)."""
    entry: dict[str, Any] = {"name": t.name, "type": t.kind}
    if t.kind == "tensor":
        entry["dtype"] = t.dtype
        entry["shape"] = None if t.dims is None else list(t.dims)
    return entry


def _source(source: int | str | None, label: Mapping[int, str], file: str | None) -> dict[str, Any]:
    """Where an output comes from: ``{"from": "subgraph<N>"}``, ``{"from": "input"}``, or
    ``{"from": "constant", "value": "constants/<k>.npy"}``."""
    if isinstance(source, int):
        return {"from": label[source]}
    return {"from": source, "value": file} if file else {"from": source}
