"""Session creation with a model's weights inline against referenced in its file, as hetero-cli's probes and
exports read them: what docs/gpu.md quotes for mlp_sanitised's compile ratio.

    python bench/referenced_weights.py [--providers CUDA,CPU] [--model mlp_sanitised] [--repeats 5]

``--model``: mlp_sanitised (bench/graphs.py) or a light/ model of the onnx wheel. Prints the median
seconds of creating one ORT session each way, interleaved.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import onnx
import onnxruntime as ort
import placement
import runtimes

import hetero_cli
from hetero_cli.ort.session import session_options


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--providers", default="CUDA,CPU", choices=["CPU", "OPENVINO,CPU", "CUDA,CPU"])
    parser.add_argument("--model", default="mlp_sanitised")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hetero_weights_") as tmp:
        path = placement.model_file(args.model, Path(tmp))
        model = hetero_cli.Core().read_model(str(path))
        inline = onnx.load(str(path)).SerializeToString()
        referenced = model.session_copy().SerializeToString()  # weights as external data in the file
        providers = runtimes.provider_list(args.providers)
        cases = {
            "weights inline": lambda: ort.InferenceSession(inline, providers=providers),
            "weights referenced in the file": lambda: ort.InferenceSession(
                referenced, session_options(external_dir=model.external_dir), providers=providers
            ),
        }
        for create in cases.values():  # warm-up: the EP's libraries load once
            create()
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.repeats):
            for name, create in cases.items():
                start = time.perf_counter()
                create()
                times[name].append(time.perf_counter() - start)
    for name, seconds in times.items():
        print(
            f"{args.model} [{args.providers}] {name}: {statistics.median(seconds) * 1e3:.1f} ms (median of {args.repeats})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
