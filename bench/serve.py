"""``hetero serve --engine local`` against ``hetero benchmark`` on the same split (issue 32's target):

    .venv/bin/python bench/serve.py --out bench/results/serve.json     # the two default splits below
    .venv/bin/python bench/serve.py --model models/digits.onnx --shape [1,1,32,32] --affinity softmax=CPU

By default it serves two splits on HETERO:OPENVINO,CPU: the onnx wheel's light/ ResNet-50 with its Gemm and
Softmax on the CPU by hand (the target judges it), and a generated 8-layer chain alternating OPENVINO/CPU
whose tensors are large for its work (a small model: its HTTP overhead is stated, not judged). For each:
- ``hetero benchmark -hint latency -api sync``: the split's own one-request latency (median), in
  ``--rounds`` rounds alternating with the server's one-client latency (the ratio is the median of the
  rounds' ratios; its noise their spread over it);
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
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
HETERO = [sys.executable, "-c", "from hetero_cli.cli import hetero; hetero()"]
TARGET = 1.10


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", help="ONNX model (default: a generated chain split by hand)")
    parser.add_argument("--device", default="HETERO:OPENVINO,CPU")
    parser.add_argument("--shape", help="the input's shape, as -shape (default: [128,512] for the chain)")
    parser.add_argument(
        "--affinity",
        action="append",
        default=[],
        metavar="NODE=DEVICE",
        help="pin a node to a device, for the benchmark and the server alike (repeatable)",
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="[DEVICE:]KEY=VALUE",
        help="a config option for the benchmark and the server alike (repeatable)",
    )
    parser.add_argument("--seconds", type=float, default=4.0, help="per measurement (default 4)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="alternating benchmark / serve latency rounds, a process each (default 5)",
    )
    parser.add_argument("--out", help="write the results as JSON here")
    return parser.parse_args()


def _split_options(affinity: list[str], config: list[str]) -> list[str]:
    """The --affinity and --config options that make the split, for hetero benchmark and serve alike."""
    pins = [option for pin in affinity for option in ("--affinity", pin)]
    return pins + [option for item in config for option in ("--config", item)]


def _benchmark_latency_ms(
    model: Path, device: str, shape: str, seconds: float, options: list[str], hint: str = "latency"
) -> float:
    """``hetero benchmark -hint HINT -api sync``'s median latency in ms (``options``: _split_options)."""
    command = [*HETERO, "benchmark", "-m", str(model), "-d", device, "-hint", hint, "-api", "sync"]
    command += options
    command += ["-t", str(max(1, round(seconds))), "-shape", shape, "--json"]
    result = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    return float(json.loads(result.stdout)["latency_ms"]["median"])


class _Server:
    """``hetero serve`` on a free port, until close()."""

    def __init__(self, model: Path, device: str, options: list[str]) -> None:
        command = [*HETERO, "serve", "-m", str(model), "-d", device, "--port", "0", "--name", "bench"]
        command += options
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


@dataclass
class Case:
    """One split to serve: what it is, its model, the input's shape, its hand affinities, and whether the
    issue's latency target judges it (the small chain only states the HTTP overhead)."""

    label: str
    model: Path
    shape: str
    affinity: list[str] = field(default_factory=list)
    judged: bool = True


def _cases(args: argparse.Namespace, tmp: Path) -> list[Case]:
    """--model's case, or the two default ones: a real light/ model split by hand (judged) and a generated
    chain whose HTTP overhead is most of its latency (stated)."""
    if args.model:
        if args.shape is None:
            raise SystemExit("--shape is needed with --model")
        return [Case(args.model, Path(args.model).resolve(), args.shape, args.affinity)]
    from graphs import light_path
    from support.serving import chain_model

    return [
        Case(
            "resnet50 (onnx wheel's light/), Gemm + Softmax on CPU by hand",
            light_path("resnet50"),
            "[1,3,224,224]",
            ["n174=CPU", "n175=CPU"],
        ),
        Case(
            "generated chain, width 512, 8 layers, OPENVINO/CPU by hand (small: overhead stated)",
            chain_model(tmp / "chain.onnx", width=512, layers=8),
            "[128,512]",
            judged=False,
        ),
    ]


def _measure(case: Case, device: str, config: list[str], seconds: float, rounds: int) -> dict[str, Any]:
    """``rounds`` alternating rounds of the benchmark's latency and one client's through the server
    (binary tensors), then JSON, and 1 and 4 clients' throughput; ``config``: --config items for both."""
    x = np.random.default_rng(0).random(_shape_dims(case.shape), dtype=np.float32)
    options = _split_options(case.affinity, config)
    bench_ms: list[float] = []
    serve_ms: list[float] = []
    # a server process per round, as the benchmark's: a process's own luck averages out
    for _ in range(rounds):
        bench_ms.append(_benchmark_latency_ms(case.model, device, case.shape, seconds, options))
        server = _Server(case.model, device, options)
        try:
            serve_ms.append(statistics.median(_client_loop(server.url, x, seconds, True)))
        finally:
            server.close()
    server = _Server(case.model, device, options)
    try:
        same_ms = _benchmark_latency_ms(case.model, device, case.shape, seconds, options, "throughput")
        json_ms = statistics.median(_client_loop(server.url, x, seconds, False))
        one = _throughput(server.url, x, seconds, 1)
        four = _throughput(server.url, x, seconds, 4)
    finally:
        server.close()
    ratios = [s / b for s, b in zip(serve_ms, bench_ms, strict=True)]
    ratio = statistics.median(ratios)
    binary_ms = statistics.median(serve_ms)
    return {
        "model": case.label,
        "device": device,
        "affinity": case.affinity,
        "config": config,
        "shape": case.shape,
        "judged": case.judged,
        "rounds": rounds,
        "benchmark_latency_ms": statistics.median(bench_ms),
        "benchmark_latency_ms_rounds": bench_ms,
        "serve_binary_latency_ms": binary_ms,
        "serve_binary_latency_ms_rounds": serve_ms,
        "ratio_serve_to_benchmark": ratio,
        "ratio_rounds": ratios,
        "ratio_noise": (max(ratios) - min(ratios)) / ratio,
        "serve_json_latency_ms": json_ms,
        "benchmark_throughput_hint_sync_latency_ms": same_ms,
        "http_overhead_ms": binary_ms - same_ms,
        "json_overhead_ms": json_ms - binary_ms,
        "throughput_1_client_rps": one,
        "throughput_4_clients_rps": four,
        "ratio_4_to_1": four / one if one else float("nan"),
    }


def _show(results: dict[str, Any]) -> None:
    for key, value in results.items():
        if isinstance(value, list):
            value = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in value)
        print(f"{key:42} {value:.4g}" if isinstance(value, float) else f"{key:42} {value}")
    ratio = results["ratio_serve_to_benchmark"]
    if results["judged"]:
        verdict = "PASS" if ratio <= TARGET else "FAIL"
        print(
            f"{verdict}: one-client serve latency / benchmark -hint latency = {ratio:.3f} (target <= {TARGET})"
        )
    else:
        print(
            f"stated: {ratio:.3f}x, of which HTTP {results['http_overhead_ms']:.2f} ms (not judged: a small model)"
        )
    print()


def main() -> None:
    args = _arguments()
    with tempfile.TemporaryDirectory() as tmp:
        cases = _cases(args, Path(tmp))
        results = [_measure(case, args.device, args.config, args.seconds, args.rounds) for case in cases]
    for result in results:
        _show(result)
    if args.out:
        document = {
            "command": " ".join(["bench/serve.py", *sys.argv[1:]]),
            "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "target": TARGET,
            "cases": results,
        }
        Path(args.out).write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
