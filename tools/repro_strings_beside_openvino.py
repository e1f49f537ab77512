"""Reproduce the crash behind placement.schedule.strings_in_turn (docs/limits.md, "Strings, sequences and maps
run in turn"): with that rule taken out, an OpenVINO EP session's run segfaults in OpenVINO's CPU plugin.

    PYTHONMALLOC=malloc MALLOC_PERTURB_=165 .venv/bin/python tools/repro_strings_beside_openvino.py off
    .venv/bin/python tools/repro_strings_beside_openvino.py on      # the rule in force: no crash

Steps (the tests' own models): compile tests/runtime/test_dynamic_shapes.py's sequence model on
HETERO:OPENVINO,CPU with PERFORMANCE_HINT=THROUGHPUT, give it one inference its input check refuses, drop it;
then run tests/runtime/test_non_tensor_values.py's alternating strings split under LATENCY, then THROUGHPUT.
With ``off``, the last one's first inference crashes (exit status 139) in seven runs of eight with glibc's
MALLOC_PERTURB_ (about one in three without); with ``on``, in none of five. Not a quirk record: the crash has not been
reproduced in plain ONNX Runtime yet (see docs/limits.md for what was tried).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import numpy as np
from runtime import test_dynamic_shapes as shapes
from runtime import test_non_tensor_values as strings

import hetero_cli as hc
from hetero_cli.placement import schedule


def main(rule: str) -> None:
    """Run the steps above with the strings rule ``on`` or ``off``."""
    if rule == "off":
        schedule.strings_in_turn = lambda plan_schedule, plan, value_type: plan_schedule
    compiled = hc.Core().compile_model(
        shapes.sequence_model(), "HETERO:OPENVINO,CPU", {"PERFORMANCE_HINT": "THROUGHPUT"}
    )
    feeds = shapes.feeds(2, 3)
    feeds["m"] = np.zeros((2, 4), np.float32)  # S disagrees with x's: refused before any session runs
    with contextlib.suppress(hc.InferenceError):  # the refusal is the step that matters
        compiled.create_infer_request().infer(feeds)
    del compiled
    for hint in ("LATENCY", "THROUGHPUT"):
        strings.test_strings_sequences_and_maps_give_plain_orts_results("alternating", hint)
        print(f"alternating strings split, {hint}: ran", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("on", "off"):
        sys.exit("usage: repro_strings_beside_openvino.py on|off (the strings_in_turn rule)")
    main(sys.argv[1])
