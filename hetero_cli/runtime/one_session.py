"""One ONNX Runtime session for a whole split: under PERFORMANCE_HINT=LATENCY, where the query's probe of
the whole model on the first device already placed every node as the plan does (``whole_plan_probe``),
that session is the plan compiled (``one_session``), with none of the per-subgraph sessions' runs and
boundaries."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from ..graph import Model
from ..placement.config import LATENCY, SplitConfig
from ..placement.devices import Device
from ..placement.partition import CONSTANT, INPUT, Plan, Subgraph
from ..placement.probes import Probe
from . import type_repair
from .compiled import Compiled, first_compiled
from .compiled_subgraph import CompiledSubgraph
from .fallback import Fallback
from .revision import Move

log = logging.getLogger("hetero_cli")


def whole_plan_probe(
    model: Model, plan: Plan, devices: Mapping[str, Device], config: SplitConfig, probes: Mapping[str, Probe]
) -> tuple[Device, Probe] | None:
    """The kept probe session (and its device) that can run all of a plan of several subgraphs, or None.

    ONNX Runtime splits a session between its EP and the CPU EP just as HETERO:<EP>,CPU does, so where the
    probe of the first device, created with the compile's settings for both devices, ran exactly the
    plan's CPU nodes on the CPU EP and every other node on its own, it already is the plan compiled: one
    session, with none of the per-subgraph sessions' runs and boundaries. Only under PERFORMANCE_HINT=
    LATENCY (the throughput modes keep one session per subgraph: the pipeline stages requests overlap on)
    and without profiling (PERF_COUNT counts each subgraph's own session).
    """
    if len(plan.subgraphs) < 2 or config.performance_mode != LATENCY or len(plan.devices) != 2:
        return None
    cpu, device = sorted((devices[name] for name in plan.devices), key=lambda d: not d.is_cpu)
    probe = probes.get(device.name)
    if not cpu.is_cpu or probe is None:
        return None
    if device.kind.folds_initializers and model.overridable_initializers:
        return None  # the probe folded them: a value fed for one would be ignored (prepare_subgraph)
    mine, theirs = config.settings(device), config.settings(cpu)
    threads = mine.intra_op_num_threads or None
    if (
        mine.profiling
        or theirs.profiling
        or probe.providers != device.providers(mine.provider_options)
        or probe.intra_op_num_threads != threads
        or theirs.provider_options  # the probe's CPU EP has no options
        or (theirs.intra_op_num_threads or None) != threads
    ):
        return None
    placed = probe.placement
    if {ep for ep, _ in placed} - {device.ep, cpu.ep}:
        return None
    if type_repair.vetoes_one_session(model, plan):
        return None
    # every node of the model the session ran, on the plan's device for it. Nodes ORT fused away (missing
    # from its record) run inside what they were fused into; a fusion's own name on the EP is the EP's
    # business, but one on the CPU EP may hold nodes the plan gives the EP: not the plan, then.
    where = {name: s.device for s in plan.subgraphs for name in s.nodes}
    for ep, nodes in placed:
        on = device.name if ep == device.ep else cpu.name
        for name, _ in nodes:
            if where.get(name, None if on == cpu.name else on) != on:
                return None
    # and no fusion on the EP starts from a node the plan gives the CPU: ORT names a fusion after its first
    # node ("matmul/MatMulAddFusion"), and affinities set by hand can put that node on the CPU
    fused_from = {
        name.split("/")[0] for ep, nodes in placed if ep == device.ep for name, _ in nodes if "/" in name
    }
    if any(where.get(first) == cpu.name for first in fused_from):
        return None
    return device, probe


def one_session(
    model: Model,
    plan: Plan,
    devices: Mapping[str, Device],
    config: SplitConfig,
    device_name: str,
    device: Device,
    probe: Probe,
    *,
    fallback: Fallback,
    moves: Sequence[Move] = (),
    draw: bool = False,
    dot_dir: str | None = None,
    loaded: bool = False,
) -> Compiled:
    """A compiled model whose subgraphs all run in ``probe``'s session (whole_plan_probe said it may);
    ``fallback``, ``moves``, ``draw`` and ``dot_dir`` as compile_plan takes them; ``loaded``: made from an export
    (LOADED_FROM_CACHE)."""
    session = probe.session
    subgraphs = [
        CompiledSubgraph(
            s,
            devices[s.device],
            session,
            ((devices[s.device].ep, tuple((n, model.node(n).get_type_name()) for n in s.nodes)),),
            from_probe=True,
        )
        for s in plan.subgraphs
    ]
    outputs = tuple(t for t in plan.outputs if plan.output_sources[t] not in (INPUT, CONSTANT))
    runs = []
    if outputs:  # model outputs that are all inputs or constants leave the session nothing to compute
        whole = Subgraph(
            index=0,
            device=device.name,
            nodes=tuple(n for s in plan.subgraphs for n in s.nodes),
            constant_nodes=(),
            inputs=tuple(i.name for i in session.get_inputs()),
            outputs=tuple(dict.fromkeys(outputs)),
        )
        label = f"the one session of subgraph1-subgraph{len(subgraphs)} ({' and '.join(plan.devices)})"
        runs.append(CompiledSubgraph(whole, device, session, probe.placement, from_probe=True, label=label))
    log.info(
        "%d subgraphs run in one ONNX Runtime session: the query's, which placed every node as the plan does "
        "(PERFORMANCE_HINT=THROUGHPUT gives each subgraph its own)",
        len(subgraphs),
    )
    return first_compiled(
        model,
        plan,
        subgraphs,
        config,
        device_name,
        fallback=fallback,
        runs=runs,
        moves=moves,
        draw=draw,
        dot_dir=dot_dir,
        loaded_from_cache=loaded,
    )
