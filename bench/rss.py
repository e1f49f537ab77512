"""Peak resident memory of one runtime, measured in a fresh interpreter.

As a script (what ``measure`` runs): ``python bench/rss.py RUNTIME MODEL.onnx INPUTS_JSON`` imports every
library the harness uses (so all runtimes start from the same baseline), records the peak RSS, compiles
the model with RUNTIME, runs one inference, and prints one JSON line: peak RSS after the imports, after
the compile and after the inference, in MiB. RUNTIME ``none`` measures the imports alone.

The peak is the kernel's high-water mark of this process's memory (``VmHWM`` in /proc/self/status).
``getrusage(RUSAGE_SELF).ru_maxrss`` is not used where /proc exists: Linux carries it across ``execve``, so
a worker started by a large harness process would report the harness's peak instead of its own.
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path
from typing import Any

from worker import run_json

HERE = Path(__file__).resolve().parent


def _peak_mib() -> float:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(runtime: str, model: Path, inputs: list[tuple[str, list[Any]]], timeout_s: float = 300) -> dict:
    """Run the worker for one runtime and model; its JSON result, or ``{"error": ...}``."""
    cmd = [sys.executable, str(HERE / "rss.py"), runtime, str(model), json.dumps(inputs)]
    return run_json(cmd, timeout_s)


def _worker(runtime: str, model: Path, inputs: list[tuple[str, list[Any]]]) -> dict:
    import contextlib

    import numpy  # noqa: F401
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401

    import hetero_cli  # noqa: F401

    with contextlib.suppress(ImportError):  # the bench extra; without it the "openvino" runtime fails alone
        import openvino  # noqa: F401

    sys.path.insert(0, str(HERE))
    import graphs
    import runtimes

    feeds = graphs.random_feeds([(name, shape) for name, shape in inputs])
    imports = _peak_mib()
    if runtime == "none":
        return {"imports_mib": imports, "peak_mib": imports}
    splits = {}
    if runtime.startswith("chain_k"):
        splits[int(runtime[7:])] = runtimes.prepare(f"split_k{runtime[7:]}", model, feeds)
    prepared = runtimes.prepare(runtime, model, feeds, splits)
    compiled = _peak_mib()
    prepared.infer()
    return {"imports_mib": imports, "compiled_mib": compiled, "peak_mib": _peak_mib()}


if __name__ == "__main__":
    name, path, spec = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
    print(json.dumps(_worker(name, path, spec)))
