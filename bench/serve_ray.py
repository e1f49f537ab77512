"""``hetero serve --engine ray`` on a two-node Ray cluster on this machine: 1 against 4 concurrent clients
(issue 32's target: 4 clients' throughput at least 1.5x one client's, on a split with two stages).

    .venv/bin/python bench/serve_ray.py                  # a generated chain, OPENVINO -> CPU by hand
    .venv/bin/python bench/serve_ray.py --out bench/results/serve_ray.json

It starts the cluster the tests use (tests/support/ray_cluster.py: a head declaring OPENVINO, a node with
the CPUs), deploys the split with the Ray engine, and runs tritonclient.http clients (a process each,
binary tensors) against it for ``--seconds``: requests per second with 1 and with 4 clients, in ``--rounds``
alternating rounds, and the ratio of their medians. Prints a table and, with --out FILE, writes the numbers as JSON. Nothing is judged by exit status.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
TARGET = 1.5
NAME = "bench"


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="per measurement (default 5)")
    parser.add_argument("--width", type=int, default=512, help="the chain's width (default 512)")
    parser.add_argument("--batch", type=int, default=64, help="rows per request (default 64)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="alternating 1-client / 4-client rounds (default 3)"
    )
    parser.add_argument("--out", help="write the results as JSON here")
    return parser.parse_args()


def _count(url: str, x: np.ndarray, seconds: float) -> float:
    """One client's requests per second, after one warm-up request."""
    from support.serving import client, infer

    c = client(url)
    infer(c, NAME, x)
    done, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        infer(c, NAME, x)
        done += 1
    return done / seconds


def _throughput(url: str, x: np.ndarray, seconds: float, clients: int) -> float:
    """Requests per second answered to ``clients`` concurrent clients, each a process of its own."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(clients, mp_context=context) as pool:
        return sum(pool.map(_count, [url] * clients, [x] * clients, [seconds] * clients))


def main() -> None:
    args = _arguments()
    from support.ray_cluster import free_port, two_node_cluster
    from support.serving import chain_model

    from hetero_cli import Core
    from hetero_cli.app.serve.engines import ENVIRONMENT
    from hetero_cli.app.serve.options import ServeOptions

    for variable, value in ENVIRONMENT["ray"].items():  # as hetero serve --engine ray sets them
        os.environ.setdefault(variable, value)
    from hetero_cli.app.serve.ray_engine import ray_serving

    with tempfile.TemporaryDirectory() as tmp, two_node_cluster() as cluster:
        core = Core()
        model = core.read_model(chain_model(Path(tmp) / f"{NAME}.onnx", width=args.width, layers=2))
        plan = core.plan(model, "HETERO:OPENVINO,CPU")
        options = ServeOptions(name=NAME, port=free_port(), address=cluster.address)
        x = np.random.default_rng(0).random((args.batch, args.width), dtype=np.float32)
        ones: list[float] = []
        fours: list[float] = []
        with ray_serving(model, plan, options) as url:
            for _ in range(args.rounds):  # alternating, so that a slow spell of the machine hits both
                ones.append(_throughput(url, x, args.seconds, 1))
                fours.append(_throughput(url, x, args.seconds, 4))
    one, four = statistics.median(ones), statistics.median(fours)
    ratios = [f / o for o, f in zip(ones, fours, strict=True) if o]
    results = {
        "command": " ".join(["bench/serve_ray.py", *sys.argv[1:]]),
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "model": f"generated chain, width {args.width}, 2 layers: OPENVINO -> CPU by hand",
        "batch": args.batch,
        "stages": [f"{s.name}: {s.device}" for s in plan.subgraphs],
        "rounds": args.rounds,
        "throughput_1_client_rps_rounds": ones,
        "throughput_4_clients_rps_rounds": fours,
        "throughput_1_client_rps": one,
        "throughput_4_clients_rps": four,
        "ratio_4_to_1": four / one if one else float("nan"),
        "ratio_rounds": ratios,
        "target": TARGET,
    }
    for key, value in results.items():
        if isinstance(value, list):
            value = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in value)
        print(f"{key:32} {value:.4g}" if isinstance(value, float) else f"{key:32} {value}")
    verdict = "PASS" if results["ratio_4_to_1"] >= TARGET else "FAIL"
    print(f"{verdict}: 4 clients / 1 client throughput = {results['ratio_4_to_1']:.3f} (target >= {TARGET})")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
