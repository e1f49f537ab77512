"""Run a measuring script in a fresh subprocess and read back the JSON line it prints last."""

from __future__ import annotations

import json
import subprocess
from typing import Any


def run_json(cmd: list[str], timeout_s: float) -> dict[str, Any]:
    """The last ``{...}`` line the command printed, parsed, or ``{"error": ...}`` saying why there is none."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {tail[:300]}"}
    return json.loads(lines[-1])
