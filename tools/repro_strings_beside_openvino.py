"""Reproduce the crash behind placement.schedule.strings_in_turn (docs/limits.md, "Strings, sequences and maps
run in turn"): with that rule and the check before a run of quirk openvino-one-thread-empty-outputs
(runtime.inputs.Inputs.refuse_conflicts) taken out, an OpenVINO EP session's run segfaults in OpenVINO's CPU
plugin.

    PYTHONMALLOC=malloc MALLOC_PERTURB_=165 .venv/bin/python tools/repro_strings_beside_openvino.py off
    PYTHONMALLOC=malloc MALLOC_PERTURB_=165 .venv/bin/python tools/repro_strings_beside_openvino.py checked
    .venv/bin/python tools/repro_strings_beside_openvino.py on      # both in force, as hetero-cli runs

Steps (the tests' own models, in the test suite's order): compile tests/runtime/test_dynamic_shapes.py's
sequence model on HETERO:OPENVINO,CPU with PERFORMANCE_HINT=THROUGHPUT (its subgraphs at once, OpenVINO's on
one thread), give it one inference whose inputs give dimension S two sizes (the one-thread OpenVINO session
runs them and answers with empty outputs, quirk openvino-one-thread-empty-outputs; the InferenceError comes
after), drop it; then run tests/runtime/test_non_tensor_values.py's alternating strings split under LATENCY,
then THROUGHPUT. With ``off``, the last one's first inference crashes (exit status 139) in seven runs of eight
with glibc's MALLOC_PERTURB_ (about one in three without); with ``on``, in none of five; with ``checked`` (the
strings rule out, the disagreeing inputs refused before any session runs), in none of six.
docs/limits.md says what else was tried.
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
from hetero_cli.runtime.inputs import Inputs


def main(mode: str) -> None:
    """Run the steps above in ``mode``: ``on`` (as hetero-cli runs), ``checked`` (the strings rule taken
    out) or ``off`` (the strings rule and the check before a run taken out)."""
    if mode in ("off", "checked"):
        schedule.strings_in_turn = lambda plan_schedule, plan, value_type: plan_schedule
    if mode == "off":
        Inputs.refuse_conflicts = lambda self, feeds: None
    compiled = hc.Core().compile_model(
        shapes.sequence_model(), "HETERO:OPENVINO,CPU", {"PERFORMANCE_HINT": "THROUGHPUT"}
    )
    feeds = shapes.feeds(2, 3)
    feeds["m"] = np.zeros((2, 4), np.float32)  # S disagrees with x's (off: OpenVINO runs it)
    with contextlib.suppress(hc.InferenceError):  # off: the run before the error matters
        compiled.create_infer_request().infer(feeds)
    del compiled
    for hint in ("LATENCY", "THROUGHPUT"):
        strings.test_strings_sequences_and_maps_give_plain_orts_results("alternating", hint)
        print(f"alternating strings split, {hint}: ran", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("on", "checked", "off"):
        sys.exit("usage: repro_strings_beside_openvino.py on|checked|off (see the module's docstring)")
    main(sys.argv[1])
