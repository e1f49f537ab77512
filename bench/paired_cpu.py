"""HETERO:CPU against one ORT CPU session on one light/ model, paired and interleaved, for a given copy of
hetero_cli: to tell a regression from this machine's noise when run.py's latency verdict moves.

    python bench/paired_cpu.py [--source DIR] [--model vgg19] [--pairs 12]

``--source``: a folder holding the ``hetero_cli`` package to time (default: this checkout's), e.g. one
made by ``git archive <commit> hetero_cli | tar -x -C DIR``. One thread per session, as ``make bench``.
Prints the median of the paired ratios (hetero-cli's inference time over ORT's, back to back).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--source", type=Path, default=HERE.parent, help="folder holding hetero_cli")
    parser.add_argument("--model", default="vgg19", help="a light/ model of the onnx wheel")
    parser.add_argument("--pairs", type=int, default=12)
    args = parser.parse_args()
    sys.path.insert(0, str(args.source))
    import graphs
    import numpy as np
    import onnxruntime as ort

    import hetero_cli

    path = str(graphs.light_path(args.model))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    config = {"CPU": {"INFERENCE_NUM_THREADS": 1}}
    request = hetero_cli.Core().compile_model(path, "HETERO:CPU", config).create_infer_request()
    (name,) = [i.name for i in session.get_inputs()]
    shape = [d if isinstance(d, int) else 1 for d in session.get_inputs()[0].shape]
    feeds = {name: np.random.default_rng(0).random(shape, dtype=np.float32)}
    session.run(None, feeds)
    request.infer(feeds)
    ratios = []
    for _ in range(args.pairs):
        start = time.perf_counter()
        session.run(None, feeds)
        ort_s = time.perf_counter() - start
        start = time.perf_counter()
        request.infer(feeds)
        ratios.append((time.perf_counter() - start) / ort_s)
    print(
        f"{hetero_cli.__file__}: {args.model} HETERO:CPU / ORT CPU, median of {args.pairs} paired ratios: "
        f"{statistics.median(ratios):.3f} (pairs {min(ratios):.3f}-{max(ratios):.3f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
