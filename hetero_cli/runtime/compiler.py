"""Compile: one ONNX Runtime session per subgraph of a plan, each checked to really run on its device; or,
under PERFORMANCE_HINT=LATENCY, the query's one session of the whole model where it placed every node as
the plan does (runtime.one_session). A compile returns a Compiled (runtime.compiled): everything it decided,
as one value. It works on its own copy of the model's types (Model.typed_copy): the caller's Model is
never changed."""

from __future__ import annotations

import functools
import itertools
import logging
import shutil
import tempfile
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import CompileError
from ..graph import Model
from ..ort.failures import failure_reason, refused_model
from ..ort.session import (
    CHECK,
    ORT_ERRORS,
    SUBGRAPH,
    assignment,
    create_session,
    ort,
    record_assignment,
    session_options,
)
from ..placement.config import SplitConfig
from ..placement.devices import Device
from ..placement.export import fed_initializers, subgraph_model
from ..placement.known_failures import known_failure
from ..placement.partition import Plan, Subgraph
from ..placement.probes import Probe, Probes
from ..placement.query import known_claims
from ..placement.schedule import AUTO, Schedule, plan_schedule
from ..quirks.cpu import FORCE_SPINNING_STOP
from . import type_repair
from .compiled import Compiled, first_compiled
from .compiled_subgraph import CompiledSubgraph
from .fallback import Fallback, move_at_compile
from .one_session import one_session, whole_plan_probe
from .parallel import in_parallel
from .profiling import SessionProfile
from .revision import Move

log = logging.getLogger("hetero_cli")

_TRACES = itertools.count(1)  # numbers the profiled sessions' trace files apart
#: ORT's session config entry that lets its intra-op threads spin ("0": they sleep when idle)
NO_SPINNING = "session.intra_op.allow_spinning"
KEPT_PROBES = (
    "HETERO_CONCURRENCY=AUTO keeps the query's sessions, made for running in turn; CONCURRENT compiles "
    "them for running at once"
)


def prepare_subgraph(
    model: Model,
    subgraph: Subgraph,
    device: Device,
    config: SplitConfig,
    profile_dir: Path | None = None,
    probe: Probe | None = None,
    *,
    shared: bool = False,
    schedule: Schedule | None = None,
    exported: bytes | None = None,
    exported_dir: Path | None = None,
) -> Callable[[], CompiledSubgraph]:
    """Export one subgraph now; the returned call creates its session on its device's EP with that
    device's settings (the EP compile). ``exported``: the subgraph's ONNX model as an import rebuilt it
    (importing.import_compiled), its weights inline or external data in ``exported_dir``: used as it is,
    nothing is exported.

    With PERF_COUNT on for the device, ORT's profiler writes its trace under ``profile_dir``. ``probe``: the
    query's session of the whole model on this device, used as is where it is what a compile would make.

    The split lets a compile export one subgraph (Python) while others' sessions are created (C++) on
    other threads. With ``shared``, the session's thread pool stops spinning as soon as its run returns
    (``session.force_spinning_stop``): the next subgraph's session needs those cores, and idle pool
    threads spinning for them made a two-session chain up to twice as slow as one session. Under a
    concurrent ``schedule`` (placement.schedule) its threads do not spin at all (sessions running at once
    share the cores, and a spinning pool takes them from the others), and a host session gets the
    schedule's share of the cores where ``config`` sets no threads for its device.
    """
    refuse_known_failures(model, subgraph, device)
    settings = config.settings(device) if schedule is None else schedule.settings(config, device)
    profiling = settings.profiling and profile_dir is not None
    providers = device.providers(settings.provider_options)
    # overridable initializers this EP would fold: inputs of an exported model, never the model as it is
    fed = fed_initializers(model, subgraph, device.kind.folds_initializers)
    if (
        probe is not None
        and exported is None
        and not profiling
        and not fed
        and _serves(probe, subgraph, providers, settings.intra_op_num_threads or None, shared)
    ):
        reused = CompiledSubgraph(subgraph, device, probe.session, probe.placement, from_probe=True)
        return lambda: _checked(reused)
    data, external_dir = _session_model(model, subgraph, fed, exported, exported_dir)
    so = session_options(external_dir=external_dir)
    record_assignment(so)
    if shared:
        so.add_session_config_entry(FORCE_SPINNING_STOP, "1")
    if schedule is not None and schedule.concurrent:
        so.add_session_config_entry(NO_SPINNING, "0")
    if settings.intra_op_num_threads:
        so.intra_op_num_threads = settings.intra_op_num_threads
    if profiling:
        so.enable_profiling = True

    def create() -> ort.InferenceSession:
        if profiling:
            # ORT names a trace <prefix>_<date and time to the second>.json: sessions of one subgraph made
            # within a second (a relax or a renewal makes it again) need
            # prefixes of their own
            so.profile_file_prefix = str(profile_dir / f"{subgraph.name}_{next(_TRACES)}")
        # no fallback: ORT would otherwise print to stdout and quietly retry on the CPU EP alone
        return create_session(
            data, so, providers, purpose=SUBGRAPH, subject=subgraph.name, device=device.name
        )

    def finish() -> CompiledSubgraph:
        try:
            session = create()
        except ORT_ERRORS as exc:
            where = (
                f"{subgraph.name} ({len(subgraph.nodes)} node(s) on {device.name}: {_ops(model, subgraph)})"
            )
            refused = refused_model(f"the model ({where})", exc)
            if refused is not None and (device.is_cpu or not _loads_on_cpu(data, model)):
                raise refused from None
            valid = (
                " (the CPU EP loads the subgraph: it is the EP's split of it ORT refuses)" if refused else ""
            )
            reason = failure_reason(exc)
            raise CompileError(
                f"{where} could not be compiled by {device.ep}: {reason}{valid}; move its nodes "
                f"to another device (affinities){_unclaimed_note(model, subgraph, device)}, or change its "
                "config",
                subgraph=subgraph.name,
                device=device.name,
                reason=reason,
            ) from None
        if device.ep not in session.get_providers():
            raise CompileError(
                f"{subgraph.name} could not run on {device.name}: ONNX Runtime dropped {device.ep} while "
                f"creating its session (usually a provider option it refused: "
                f"{dict(settings.provider_options)}); check the config for {device.name}"
            )
        profiler = SessionProfile(session) if profiling else None
        return _checked(CompiledSubgraph(subgraph, device, session, assignment(session), profiler))

    return finish


def _session_model(
    model: Model,
    subgraph: Subgraph,
    fed: frozenset[str],
    exported: bytes | None,
    exported_dir: Path | None = None,
) -> tuple[str | bytes, Any]:
    """What a subgraph's session loads (the model's file where the subgraph is all of it, else the
    subgraph exported now, or ``exported``, whose external data lies in ``exported_dir``) and the folder
    its external data lies in."""
    if exported is not None:
        return exported, exported_dir
    whole = model.session_file if not fed and _is_whole_model(model, subgraph) else None
    data = str(whole) if whole is not None else subgraph_model(model, subgraph, fed=fed).SerializeToString()
    return data, model.external_dir


def _checked(compiled: CompiledSubgraph) -> CompiledSubgraph:
    if compiled.fallback_nodes:
        log.warning("%s", compiled.description)
    return compiled


def _is_whole_model(model: Model, subgraph: Subgraph) -> bool:
    """Whether ``subgraph`` is the model itself: every node, every input, every model output (one that is
    an input or a constant, served without a session, must not come from the file: the OpenVINO EP refuses
    an initializer as a graph output, quirk openvino-initializer-output)."""
    return (
        len(subgraph.nodes) + len(subgraph.constant_nodes) == len(model)
        and set(subgraph.inputs) == set(model.input_names)
        and set(subgraph.outputs) == set(model.output_names)
    )


def _serves(
    probe: Probe, subgraph: Subgraph, providers: list[Any], threads: int | None, shared: bool
) -> bool:
    """Whether a probe session is the session a compile would create for ``subgraph``: same providers,
    threads and force_spinning_stop (``shared``), the same operations where it is a part's, the same
    inputs and (at least) its outputs."""
    session = probe.session
    return (
        (probe.nodes is None or probe.nodes == set(subgraph.nodes))
        and probe.providers == providers
        and probe.intra_op_num_threads == threads
        and probe.shared == shared
        and {i.name for i in session.get_inputs()} == set(subgraph.inputs)
        and set(subgraph.outputs) <= {o.name for o in session.get_outputs()}
    )


def refuse_known_failures(model: Model, subgraph: Subgraph, device: Device) -> None:
    """CompileError for nodes the device's EP is known to fail on (known_failures.known_failure), before ORT tries;
    the message gives the first such node's reason (its quirk's summary)."""
    found = [(model.node(n), known_failure(model.node(n), device)) for n in subgraph.nodes]
    bad = [(node, quirk) for node, quirk in found if quirk is not None]
    if bad:
        names = ", ".join(f"{n.get_friendly_name()} ({n.get_type_name()})" for n, _ in bad[:5])
        why = bad[0][1].summary
        raise CompileError(
            f"{subgraph.name} ({len(subgraph.nodes)} node(s) on {device.name}) holds {names}: "
            f"{why}. Move these nodes to another device (affinities), e.g. CPU",
            subgraph=subgraph.name,
            device=device.name,
            reason=f"it holds {names}: {why}",
        )


def _ops(model: Model, subgraph: Subgraph) -> str:
    kinds = list(dict.fromkeys(model.node(n).get_type_name() for n in subgraph.nodes))
    return ", ".join(kinds[:6]) + (" ..." if len(kinds) > 6 else "")


def _loads_on_cpu(data: str | bytes, model: Model) -> bool:
    """Whether the CPU EP alone creates a session of an exported subgraph: where another EP's session of it
    was refused as an invalid model (the OpenVINO EP can take nodes around one it leaves to the CPU EP,
    which ORT then finds to be a cycle: quirk openvino-cyclic-split), the EP is at fault, not the model."""
    try:
        create_session(
            data,
            session_options(external_dir=model.external_dir),
            ["CPUExecutionProvider"],
            purpose=CHECK,
            subject=f"the CPU EP's load of {model.name}",
            enable_fallback=True,
        )
    except ORT_ERRORS as exc:  # the CPU EP refuses it too: the model is at fault
        log.debug("the CPU EP refuses %s's subgraph too: %s", model.name, failure_reason(exc))
        return False
    return True


def _unclaimed_note(model: Model, subgraph: Subgraph, device: Device) -> str:
    """The subgraph's nodes ``device`` does not take, for a compile error's advice: from the query when
    it probed the device (automatic mode), else a pointer to ``hetero query``."""
    if device.is_cpu:
        return ""
    claimed = known_claims(model, device)
    if claimed is None:
        return f" (`hetero query -d HETERO:{device.name},CPU` shows which nodes {device.name} takes)"
    refused = [n for n in subgraph.nodes if n not in claimed]
    if not refused:
        return ""
    shown = ", ".join(f"{n} ({model.node(n).get_type_name()})" for n in refused[:5])
    return f", first those {device.name} does not take: {shown}" + (" ..." if len(refused) > 5 else "")


def compile_plan(
    model: Model,
    plan: Plan,
    devices: Mapping[str, Device],
    config: SplitConfig,
    device_name: str,
    probes: Mapping[str, Probe] | None = None,
    *,
    fallback: Fallback | None = None,
    moves: Sequence[Move] = (),
    draw: bool = False,
    dot_dir: str | None = None,
) -> Compiled:
    """Create every subgraph's session; the plan must only name devices in ``devices``.

    ``probes``: whole-model probe sessions by device (the query's, query.Probes); a plan of one subgraph on such a
    device uses its probe rather than compiling the model again, and so does a plan of several under
    PERFORMANCE_HINT=LATENCY where the probe placed every node as the plan does (whole_plan_probe). A plan
    of several subgraphs uses the probe of a part (Probes.parts) as the session of a subgraph it serves
    exactly (_serves). Probes not used are dropped from ``probes`` before any session is created. Sessions are created in parallel
    (parallel.compile_workers threads) while this thread exports the next subgraphs. Boundary types the
    sessions contradict are corrected on the way (type_repair), in a copy of ``model``'s types.

    ``fallback``: the HETERO_FALLBACK policy the compiled model keeps (off, by default); ``moves``: those
    it made before this plan; ``draw``: whether the .dot files of the plan are drawn once every session
    is made, into ``dot_dir`` (None: the current directory). Returns the Compiled. Raises CompileError (or ModelError) for a subgraph no
    session can be made of.
    """
    model = model.typed_copy()  # the compile's own corrections: the caller's Model is never changed
    if fallback is None:
        fallback = Fallback(False, bool(model.affinities()), tuple(devices.values()))
    kept = probes if probes is not None else {}
    whole = whole_plan_probe(model, plan, devices, config, kept)
    if whole is not None:
        return one_session(
            model,
            plan,
            devices,
            config,
            device_name,
            *whole,
            fallback=fallback,
            moves=moves,
            draw=draw,
            dot_dir=dot_dir,
        )
    shared = len(plan.subgraphs) > 1
    schedule = plan_schedule(plan, devices, config, model.value_type)
    used = _probes_used(model, plan, devices, config, kept, shared)
    if schedule.concurrent and config.concurrency == AUTO and used:
        # the query's sessions serve as they are (their threads are the EP's defaults): AUTO keeps them
        # rather than compile the parts again for a gain nothing measured
        schedule = schedule.in_turn(KEPT_PROBES)
    if shared or not used:
        # the probes no subgraph uses (every probe but the whole model's, of a plan of one subgraph)
        # must not stay in memory while sessions are created
        kept.clear()
    if isinstance(kept, Probes):
        kept.parts.clear()
    profiled = any(config.settings(devices[s.device]).profiling for s in plan.subgraphs)
    profile_dir = Path(tempfile.mkdtemp(prefix="hetero_profile_")) if profiled else None
    try:
        compiled = _compile_subgraphs(model, plan, devices, config, profile_dir, used, shared, schedule)

        def recompile(c: CompiledSubgraph) -> CompiledSubgraph:
            device = devices[c.subgraph.device]
            return prepare_subgraph(
                model, c.subgraph, device, config, profile_dir, None, shared=True, schedule=schedule
            )()

        compiled = type_repair.correct_contradicted(model, plan, compiled, recompile)
        result = first_compiled(
            model,
            plan,
            compiled,
            config,
            device_name,
            fallback=fallback,
            moves=moves,
            schedule=schedule,
            draw=draw,
            dot_dir=dot_dir,
            profile_dir=profile_dir,
        )
    except BaseException:
        if profile_dir is not None:
            shutil.rmtree(profile_dir, ignore_errors=True)
        raise
    if profile_dir is not None:
        weakref.finalize(result, shutil.rmtree, profile_dir, True)
    return result


def compile_with_fallback(
    model: Model,
    plan: Plan,
    devices: Mapping[str, Device],
    config: SplitConfig,
    device_name: str,
    probes: Mapping[str, Probe] | None,
    fallback: Fallback,
    draw: bool = False,
    dot_dir: str | None = None,
) -> Compiled:
    """compile_plan, and where a subgraph's session fails: with fallback on, its nodes to the next device
    that supports them and the model partitioned again, until every session compiles; with it off, the
    error names where HETERO_FALLBACK=YES would move it.

    ``devices``: the priority list's devices by name (a moved subgraph's new device among them);
    ``draw`` and ``dot_dir``: as compile_plan takes them. Returns the Compiled
    (its revision holds the moves made). Raises CompileError naming every device tried where none
    compiles the subgraph, or as compile_plan does.
    """
    tried: dict[str, list[tuple[str, str]]] = {}  # node -> [(device, reason)] it failed on
    moves: list[Move] = []
    while True:
        try:
            return compile_plan(
                model,
                plan,
                devices,
                config,
                device_name,
                probes,
                fallback=fallback,
                moves=tuple(moves),
                draw=draw,
                dot_dir=dot_dir,
            )
        except CompileError as exc:
            failed = next((s for s in plan.subgraphs if s.name == exc.subgraph), None)
            if failed is None or exc.device is None:
                raise
            hint = fallback.hint(model, failed.nodes, exc.device)
            if not fallback.enabled:
                raise CompileError(str(exc) + hint, subgraph=exc.subgraph, device=exc.device) from None
            plan = move_at_compile(model, plan, failed, exc, fallback, tried, moves)


def _compile_subgraphs(
    model: Model,
    plan: Plan,
    devices: Mapping[str, Device],
    config: SplitConfig,
    profile_dir: Path | None,
    probes: Mapping[str, Probe],
    shared: bool,
    schedule: Schedule | None = None,
) -> list[CompiledSubgraph]:
    """Every subgraph's session, created in parallel (parallel.in_parallel), or the probe ``probes`` holds
    for it (by subgraph name); once more with boundary types corrected after a failure about shapes
    (type_repair.retry_on_shape_failure). ``schedule``: as prepare_subgraph takes it."""

    def attempt() -> list[CompiledSubgraph]:
        return in_parallel(
            [
                functools.partial(
                    prepare_subgraph,
                    model,
                    s,
                    devices[s.device],
                    config,
                    profile_dir,
                    probes.get(s.name),
                    shared=shared,
                    schedule=schedule,
                )
                for s in plan.subgraphs
            ]
        )

    return type_repair.retry_on_shape_failure(model, plan, attempt)


def _probes_used(
    model: Model,
    plan: Plan,
    devices: Mapping[str, Device],
    config: SplitConfig,
    probes: Mapping[str, Probe],
    shared: bool,
) -> dict[str, Probe]:
    """{subgraph name: the probe that serves it as its session}: the whole model's probe of its device for
    a plan of one subgraph, else the probe of a part (Probes.parts) that _serves it; none for a subgraph
    whose EP would fold an overridable initializer or that is profiled (prepare_subgraph)."""
    parts = probes.parts if isinstance(probes, Probes) else {}
    used: dict[str, Probe] = {}
    for s in plan.subgraphs:
        device = devices[s.device]
        settings = config.settings(device)
        if settings.profiling or fed_initializers(model, s, device.kind.folds_initializers):
            continue
        candidates = [probes[s.device]] if not shared and s.device in probes else []
        candidates += [p for p in parts.get(s.device, []) if p not in used.values()]
        providers = device.providers(settings.provider_options)
        threads = settings.intra_op_num_threads or None
        found = next((p for p in candidates if _serves(p, s, providers, threads, shared)), None)
        if found is not None:
            used[s.name] = found
    return used
