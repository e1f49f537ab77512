"""An export of a model over 2 GB (protobuf's limit on one message), and its import, measured by hand:

    .venv/bin/python bench/big_export.py                # 3 weights of 800 MB: a 2.4 GB model
    .venv/bin/python bench/big_export.py --elements 50000000 --keep /tmp/big

Export format 2 keeps large weights out of the models' protobuf messages (runtime/artifacts/weight_pool.py), so such
a model exports at all; this prints how long the export and the import take, the artifact's size, the
process's peak RSS after each, and whether the imported model's outputs are the compiled one's, bit for
bit. It builds the model (three Add nodes, each with one weight, saved with external data) in a temporary
folder, or in ``--keep`` (reused when there). Needs about 3x the weights in disk and 3.5x in RAM.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

import hetero_cli


def build(folder: Path, elements: int) -> Path:
    """The model in ``folder``/big.onnx (made if missing): x + w0 + w1 + w2, each w of ``elements`` float32."""
    path = folder / "big.onnx"
    if path.exists():
        return path
    weights = [numpy_helper.from_array(np.full((elements,), i + 1, np.float32), f"w{i}") for i in range(3)]
    names = ["x", "a0", "a1", "y"]
    nodes = [helper.make_node("Add", [names[i], f"w{i}"], [names[i + 1]], name=f"add{i}") for i in range(3)]
    graph = helper.make_graph(
        nodes,
        "big",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [elements])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [elements])],
        weights,
    )
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path), save_as_external_data=True, location="big.data")
    return path


def peak_rss_gib() -> float:
    """This process's peak resident set so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def measure(folder: Path, elements: int) -> None:
    model = build(folder, elements)
    weights_gib = 3 * elements * 4 / 2**30
    start = time.perf_counter()
    compiled = hetero_cli.Core().compile_model(str(model), "HETERO:CPU")
    print(f"model: {weights_gib:.2f} GiB of weights; compiled in {time.perf_counter() - start:.1f} s")
    out = folder / "big.hetero"
    start = time.perf_counter()
    compiled.export_model(out)
    took = time.perf_counter() - start
    print(f"export: {took:.1f} s, {out.stat().st_size / 2**30:.2f} GiB, peak RSS {peak_rss_gib():.1f} GiB")
    x = np.zeros((elements,), np.float32)
    want = compiled({"x": x})["y"]
    del compiled
    start = time.perf_counter()
    imported = hetero_cli.Core().import_model(out)
    print(f"import: {time.perf_counter() - start:.1f} s, peak RSS {peak_rss_gib():.1f} GiB")
    print("outputs bit for bit:", bool(np.array_equal(imported({"x": x})["y"], want)))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--elements", type=int, default=200_000_000, help="float32 elements per weight")
    parser.add_argument("--keep", type=Path, help="build and keep the model and export here")
    args = parser.parse_args()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        measure(args.keep, args.elements)
    else:
        with tempfile.TemporaryDirectory(prefix="hetero_big_export_") as tmp:
            measure(Path(tmp), args.elements)
    return 0


if __name__ == "__main__":
    sys.exit(main())
