"""``hetero serve --engine local`` against ``hetero benchmark`` on the same split (issue 32's target):

    .venv/bin/python bench/serve.py                      # a generated 8-layer chain split OPENVINO/CPU by hand
    .venv/bin/python bench/serve.py --model models/digits.onnx --shape [1,1,32,32] --seconds 10

For each model it measures, on this machine:
- ``hetero benchmark -hint latency -api sync``: the split's own one-request latency (median);
- the same with ``-hint throughput`` (the compile the server runs: a session per subgraph), against which
  the HTTP overhead (binary tensors) is reckoned;
- ``hetero serve`` (a subprocess, as a user runs it) with one tritonclient.http client in a loop, binary
  tensors: the median request latency, the ratio to the benchmark's (target: at most 1.10x), and the same
  client sending JSON (the HTTP + JSON overhead, stated separately: on a small model it is most of it);
- 1 and 4 concurrent clients (a process each): requests per second, and the ratio 4 / 1.

Prints a table and, with --out FILE, writes the numbers as JSON. Nothing is judged by exit status.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
HETERO = [sys.executable, "-c", "from hetero_cli.cli import hetero; hetero()"]
TARGET = 1.10


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", help="ONNX model (default: a generated chain split by hand)")
    parser.add_argument("--device", default="HETERO:OPENVINO,CPU")
    parser.add_argument("--shape", help="the input's shape, as -shape (default: [128,512] for the chain)")
    parser.add_argument("--seconds", type=float, default=5.0, help="per measurement (default 5)")
    parser.add_argument("--out", help="write the results as JSON here")
    return parser.parse_args()


def _benchmark_latency_ms(
    model: Path, device: str, shape: str, seconds: float, hint: str = "latency"
) -> float:
    """``hetero benchmark -hint HINT -api sync``'s median latency in ms."""
    command = [*HETERO, "benchmark", "-m", str(model), "-d", device, "-hint", hint, "-api", "sync"]
    command += ["-t", str(max(1, round(seconds))), "-shape", shape, "--json"]
    result = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    return float(json.loads(result.stdout)["latency_ms"]["median"])


class _Server:
    """``hetero serve`` on a free port, until close()."""

    def __init__(self, model: Path, device: str) -> None:
        command = [*HETERO, "serve", "-m", str(model), "-d", device, "--port", "0", "--name", "bench"]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT
        )
        assert self.process.stdout is not None
        for line in self.process.stdout:
            found = re.search(r"at (http://\S+):", line)
            if found:
                self.url = found[1]
                return
        raise RuntimeError("hetero serve exited before it listened")

    def close(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(60)


def _client_loop(url: str, x: np.ndarray, seconds: float, binary: bool) -> list[float]:
    """One client inferring ``x`` again and again for ``seconds``: each request's latency in ms."""
    import tritonclient.http as httpclient
    from support.serving import client

    c = client(url)
    given = httpclient.InferInput(_input_name(c), list(x.shape), _datatype(x))
    given.set_data_from_numpy(x, binary_data=binary)
    latencies: list[float] = []
    c.infer("bench", [given])  # warm-up
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        c.infer("bench", [given])
        latencies.append((time.perf_counter() - start) * 1e3)
    return latencies


def _input_name(c) -> str:
    return c.get_model_metadata("bench")["inputs"][0]["name"]


def _datatype(x: np.ndarray) -> str:
    from hetero_cli.app.serve.protocol import datatype_of

    return datatype_of(x.dtype)


def _count(url: str, x: np.ndarray, seconds: float) -> float:
    """One client process's requests per second (after its warm-up)."""
    return len(_client_loop(url, x, seconds, True)) / seconds


def _throughput(url: str, x: np.ndarray, seconds: float, clients: int) -> float:
    """Requests per second answered to ``clients`` concurrent clients, each a process of its own (so that
    the clients do not share one interpreter's lock)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(clients, mp_context=context) as pool:
        return sum(pool.map(_count, [url] * clients, [x] * clients, [seconds] * clients))


def _shape_dims(shape: str) -> list[int]:
    return [int(d) for d in shape.strip("[]").split(",")]


def main() -> None:
    args = _arguments()
    with tempfile.TemporaryDirectory() as tmp:
        if args.model:
            model, shape = Path(args.model).resolve(), args.shape
            if shape is None:
                raise SystemExit("--shape is needed with --model")
        else:
            from support.serving import chain_model

            model, shape = (
                chain_model(Path(tmp) / "chain.onnx", width=512, layers=8),
                args.shape or "[128,512]",
            )
        x = np.random.default_rng(0).random(_shape_dims(shape), dtype=np.float32)
        bench_ms = _benchmark_latency_ms(model, args.device, shape, args.seconds)
        same_ms = _benchmark_latency_ms(model, args.device, shape, args.seconds, "throughput")
        server = _Server(model, args.device)
        try:
            binary_ms = statistics.median(_client_loop(server.url, x, args.seconds, True))
            json_ms = statistics.median(_client_loop(server.url, x, args.seconds, False))
            one = _throughput(server.url, x, args.seconds, 1)
            four = _throughput(server.url, x, args.seconds, 4)
        finally:
            server.close()
    results = {
        "model": str(model) if args.model else "generated chain, width 512, 8 layers, OPENVINO/CPU by hand",
        "device": args.device,
        "shape": shape,
        "benchmark_latency_ms": bench_ms,
        "serve_binary_latency_ms": binary_ms,
        "serve_json_latency_ms": json_ms,
        "ratio_serve_to_benchmark": binary_ms / bench_ms,
        "benchmark_throughput_hint_sync_latency_ms": same_ms,
        "http_overhead_ms": binary_ms - same_ms,
        "json_overhead_ms": json_ms - binary_ms,
        "throughput_1_client_rps": one,
        "throughput_4_clients_rps": four,
        "ratio_4_to_1": four / one if one else float("nan"),
    }
    for key, value in results.items():
        print(f"{key:42} {value:.4g}" if isinstance(value, float) else f"{key:42} {value}")
    verdict = "PASS" if results["ratio_serve_to_benchmark"] <= TARGET else "FAIL"
    print(
        f"{verdict}: one-client serve latency / benchmark -hint latency = {results['ratio_serve_to_benchmark']:.3f} (target <= {TARGET})"
    )
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
