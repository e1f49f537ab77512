"""Query: which nodes each device supports (what its EP claims) and the affinities a compile uses.

A device's support is read from ONE probe session with its EP first in the provider list, graph
optimizations off (node names stay the model's), and ORT's record of which EP took which node. The cost
grows with the number of devices, not of nodes. Nodes a quirk record says the EP fails on are left out
of its probe (KNOWN_FAILURES). A probe that ORT refuses to create is retried without the node that has no
kernel, or in halves cut among the operations, so a query never fails because of one node.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import onnx

from ..errors import AffinityError, ConfigError, ModelError, UnsupportedNodesError
from ..graph import Model, Node
from ..graph.index import NONDETERMINISTIC
from ..ort.failures import failure_reason, refused_model, unimplemented_node
from ..ort.session import (
    ORT_ERRORS,
    PROBE,
    assignment,
    create_session,
    ort,
    record_assignment,
    session_options,
)
from ..quirks import in_force
from ..quirks.cpu import FORCE_SPINNING_STOP, HALF_FLOAT_CASTS_UNRECORDED
from .device_string import DeviceRequest
from .devices import Device, canonical_name, lookup
from .export import extract, record_output_types
from .known_failures import known_to_fail
from .probes import Probe, Probes, cut_after, session_settings

log = logging.getLogger("hetero_cli")


def supported_nodes(model: Model, device: Device, probes: Probes | None = None) -> frozenset[str]:
    """Friendly names of the non-constant nodes ``device``'s EP claims in ``model`` (cached per model).

    ``probes``: the compile's settings for the probe sessions, and where a whole-model probe the compile
    can use is kept (Probes); None: the device's own settings, nothing kept.
    """
    options, threads = session_settings(device, probes)
    key = (device.name, tuple(sorted({**device.provider_options, **(options or {})}.items())), threads)
    if key not in model.query_cache:
        nodes = model.get_ops()
        # never hand an EP what it is known to fail on (or abort the process): the rest is probed at once,
        # or, where a compile may keep the probes (an EP that compiles the graph itself), part by part
        kept = [n for n in nodes if not known_to_fail(n, device)]
        if len(kept) == len(nodes):
            claims = _claims(model, device, nodes, probes, whole=True)
        elif probes is None or not device.kind.optimized_probe:
            claims = _claims(model, device, _operations(kept), probes)
        else:
            left_out = {n.friendly_name for n in nodes} - {n.friendly_name for n in kept}
            parts = cut_after(model, _operations(kept), left_out)
            claims = set().union(*(_part_claims(model, device, part, probes) for part in parts))
        model.query_cache[key] = frozenset(claims)
    return model.query_cache[key]


def _part_claims(model: Model, device: Device, part: list[Node], probes: Probes) -> set[str]:
    """What ``device`` claims of ``part`` (operations a cut of the model left, cut_after): from a probe of
    the part created as a compile of several subgraphs creates a subgraph's session (graph optimizations
    on, force_spinning_stop), kept in ``probes.parts`` for the compile, where that probe can tell
    (_optimized_claims); else as _claims finds it."""
    try:
        proto = _piece(model, part)
    except ModelError:
        proto = None
    wanted = {n.friendly_name for n in part}
    answer = None if proto is None else _optimized_claims(proto, model, device, wanted, probes, part=True)
    return _claims(model, device, part, probes) if answer is None else answer


def _operations(nodes: Sequence[Node]) -> list[Node]:
    """The non-constant nodes of ``nodes``: what a probe of part of a model is cut from. A piece takes the
    constants its nodes read along (_piece); cut among the constants too, a piece would hand over one read
    only by the other part as an output of its own, which the OpenVINO EP refuses, and bisection would go
    down to single nodes."""
    return [n for n in nodes if not n.is_constant]


def known_claims(model: Model, device: Device) -> frozenset[str] | None:
    """What a query already found ``device`` claims in ``model`` (under any settings), None if no query
    probed it: for advice in an error, where probing the whole model again could take longer than the
    compile that failed."""
    return next((claims for key, claims in model.query_cache.items() if key[0] == device.name), None)


def _piece(model: Model, nodes: Sequence[Node]) -> onnx.ModelProto:
    """A probe model of some nodes: constant inputs computed inside, every other input cut."""
    chosen = {n.index: n for n in nodes}
    for node in model.constant_nodes_for(t for n in nodes for t in n.inputs):
        chosen.setdefault(node.index, node)
    produced = {t for n in chosen.values() for t in n.outputs}
    inputs = list(
        dict.fromkeys(
            t
            for n in chosen.values()
            for t in n.inputs
            if t not in produced and t not in model.initializer_names
        )
    )
    read = {t for n in chosen.values() for t in n.inputs}
    outputs = [t for n in nodes for t in n.outputs if t not in read or t in model.output_names]
    if not outputs:
        outputs = [nodes[-1].outputs[0]] if nodes[-1].outputs else []
    # outputs typed as onnx knows them: ORT infers the rest, and a kept probe's session answers them
    return extract(model, chosen.values(), inputs, outputs, name=f"{model.name}_probe", typed_outputs=False)


def _claims(
    model: Model, device: Device, nodes: list[Node], probes: Probes | None, *, whole: bool = False
) -> set[str]:
    """Names among ``nodes`` the device's EP claims; never raises for nodes it cannot take."""
    if not nodes:
        return set()
    wanted = {n.friendly_name for n in nodes if not n.is_constant}
    if not wanted:
        return set()
    if whole and device.is_cpu and _loads(model.weightless_copy(rename=True), model, device, probes):
        # the CPU EP picks kernels by op and type alone: a probe without the weights answers the same
        return wanted
    try:
        proto = model.session_copy() if whole else _piece(model, nodes)
    except ModelError:
        operations = _operations(nodes)
        return set() if len(operations) == 1 else _halves(model, device, operations, probes)
    if whole and device.kind.optimized_probe:
        answer = _optimized_claims(proto, model, device, wanted, probes)
        if answer is not None:
            return answer
    try:
        sess = _probe_session(proto, model, device, probes)
    except ORT_ERRORS as exc:  # the EP refused the probe: find which of the nodes it takes
        missing = unimplemented_node(exc)
        operations = _operations(nodes)
        if missing in wanted and len(operations) > 1:
            rest = [n for n in operations if n.friendly_name != missing]
            return _claims(model, device, rest, probes)
        if len(operations) == 1:
            return set()
        found = _halves(model, device, operations, probes)
        if whole and not found and not device.is_cpu:
            # every probe failed: say why rather than quietly leave every node to the next device (the
            # reason may be the EP's limits, or that it cannot load this model at all: its file, weights)
            log.warning(
                "%s took no node: every probe of it failed, the whole model's with: %s",
                device.name,
                failure_reason(exc),
            )
        return found
    if device.is_cpu:
        # ORT runs what the CPU EP lacks a kernel for at this type through casts it inserts itself; those
        # nodes are missing from the assignment record but run, so a CPU probe that loads supports them all.
        return wanted
    claimed = set()
    for ep, placed in assignment(sess):
        if ep == device.ep:
            claimed.update(name for name, _ in placed)
    return claimed & wanted


def _optimized_claims(
    proto: onnx.ModelProto,
    model: Model,
    device: Device,
    wanted: set[str],
    probes: Probes | None = None,
    *,
    part: bool = False,
) -> set[str] | None:
    """The claims read from a probe with ORT's default graph optimizations, or None where it cannot tell.
    ``part``: ``proto`` is a part of the model (_part_claims): its probe is kept among ``probes.parts``,
    created with force_spinning_stop as a compile of several subgraphs creates their sessions.

    Such a probe is the very session ORT would create for the model, so the query's compile is the one a
    compile of a whole-model plan needs anyway (the probe is kept and reused); with optimizations off, the
    OpenVINO EP compiles the unfused graph, 20-30% slower on the light/ models. ORT's optimizations fuse
    and fold nodes before placing them (Conv+BatchNormalization, MatMul+Add into Gemm, Dropout dropped),
    so some nodes are missing from its record. A missing node that repeats a recorded one (same op, same
    attributes, same inputs: ORT's common subexpression elimination kept one of them) takes that node's
    verdict. Each connected group of the other missing nodes takes the verdict of the nodes around it when
    they agree; where they disagree, where a group has no neighbour, or where a
    node the model does not name ran outside the device (a fusion that may have swallowed nodes the device
    refuses), this gives up and the caller probes again without optimizations (exact names).
    """
    sess, providers, threads = _as_compiled(proto, model, device, probes, shared=part)
    if sess is None:
        return None
    placed = assignment(sess)
    if part:
        record_output_types(model, sess)
    names = {n.friendly_name for n in model.get_ops()}
    claimed = {name for ep, nodes in placed if ep == device.ep for name, _ in nodes}
    elsewhere = {name for ep, nodes in placed if ep != device.ep for name, _ in nodes}
    if not elsewhere <= names:
        return None
    missing = wanted - claimed - elsewhere
    for name, twin in (_repeats(model, missing, claimed | elsewhere) if missing else {}).items():
        (claimed if twin in claimed else elsewhere).add(name)
    if model.has_half_floats and wanted - claimed - elsewhere and in_force(HALF_FLOAT_CASTS_UNRECORDED):
        # a node missing from the record may have run on the CPU EP through Casts ORT inserted (no 16-bit
        # kernel there), not been fused away: only the exact probe can tell (cpu-half-float-casts-unrecorded)
        return None
    if not elsewhere:
        verdict: set[str] | None = set(wanted)
    else:
        verdict = _resolve_missing(model, wanted, claimed & wanted, elsewhere)
    if verdict is not None and probes is not None:
        kept = Probe(providers, sess, placed, threads, shared=part, nodes=frozenset(wanted) if part else None)
        if part:
            probes.parts.setdefault(device.name, []).append(kept)
        else:
            probes[device.name] = kept
    return verdict


def _as_compiled(
    proto: onnx.ModelProto, model: Model, device: Device, probes: Probes | None, *, shared: bool
) -> tuple[ort.InferenceSession | None, list[Any], int | None]:
    """A probe of ``proto`` created as a compile creates a session (ORT's default graph optimizations, the
    compile's provider options and threads, force_spinning_stop with ``shared``), the providers and the
    threads it was given; None for the session where ORT refuses it (ConfigError raised)."""
    options, threads = session_settings(device, probes)
    providers = device.providers(options)
    try:
        sess = _probe_session(
            proto, model, device, probes, optimize=True, providers=providers, threads=threads, shared=shared
        )
    except ORT_ERRORS as exc:  # the caller falls back to another probe: the reason is only logged
        log.debug("an optimized probe on %s failed: %s", device.name, failure_reason(exc))
        return None, providers, threads
    return sess, providers, threads


def _repeats(model: Model, missing: set[str], recorded: set[str]) -> dict[str, str]:
    """{missing node: the recorded node it repeats}: the same domain, op type and attributes over the same
    inputs, where tensors two repeating nodes make count as one (so a chain of repeats is found whole).
    ORT's common subexpression elimination keeps one node of each such set, and records only that one:
    the others ran where it ran."""
    groups: dict[tuple[object, ...], list[str]] = {}
    same: dict[str, str] = {}  # tensor -> the same tensor of the first node of its group
    for node in model.get_ops():
        proto = node.proto
        if proto.op_type in NONDETERMINISTIC:  # ORT merges no random op: each draws its own values
            continue
        key = (
            proto.domain,
            proto.op_type,
            tuple(same.get(t, t) for t in proto.input),
            tuple(a.SerializeToString(deterministic=True) for a in proto.attribute),
        )
        group = groups.setdefault(key, [])
        if group:
            for mine, theirs in zip(proto.output, model.node(group[0]).proto.output, strict=False):
                same[mine] = same.get(theirs, theirs)
        group.append(node.friendly_name)
    twins: dict[str, str] = {}
    for group in groups.values():
        kept = next((name for name in group if name in recorded), None)
        if kept is not None:
            twins.update((name, kept) for name in group if name in missing)
    return twins


def _resolve_missing(
    model: Model, wanted: set[str], claimed: set[str], elsewhere: set[str]
) -> set[str] | None:
    """``claimed`` plus the missing nodes whose surviving neighbours are all claimed; None if a group of
    missing nodes has no surviving neighbour. A group between claimed and unclaimed nodes (a quantized
    model's scale multiplications, fused away between a DynamicQuantizeLinear the EP runs and a
    ConvInteger it refuses) is left to the next device: ORT fused it, so it runs nowhere as a node of its own
    in the probe, and every device after this one can run it."""
    missing = wanted - claimed - elsewhere
    consumers = model.consumers()
    result = set(claimed)
    seen: set[str] = set()
    for start in missing:
        if start in seen:
            continue
        group, around, todo = [], set(), [start]
        seen.add(start)
        while todo:
            node = model.node(todo.pop())
            group.append(node.friendly_name)
            neighbours = [model.producer[t] for t in node.inputs if t in model.producer]
            neighbours += [c for t in node.outputs for c in consumers.get(t, ())]
            for other in neighbours:
                name = other.friendly_name
                if name in missing:
                    if name not in seen:
                        seen.add(name)
                        todo.append(name)
                elif name in wanted:
                    around.add(name in claimed)
        if not around:
            return None
        if around == {True}:
            result.update(group)
    return result


def _probe_session(
    proto: onnx.ModelProto,
    model: Model,
    device: Device,
    probes: Probes | None = None,
    *,
    optimize: bool = False,
    providers: list[Any] | None = None,
    threads: int | None = None,
    shared: bool = False,
) -> ort.InferenceSession:
    """A probe session of ``proto`` on ``device``, with the provider options and threads its compile's
    sessions get (``probes``' settings) unless given, force_spinning_stop with ``shared``; ConfigError
    where ORT dropped the device's EP (it does so, with only a log line, for a provider option it
    refuses)."""
    options, configured = session_settings(device, probes)
    so = session_options(optimize=optimize, external_dir=model.external_dir)
    if shared:
        so.add_session_config_entry(FORCE_SPINNING_STOP, "1")
    if threads or configured:
        so.intra_op_num_threads = threads or configured
    record_assignment(so)
    providers = providers or device.providers(options)
    # create_session keeps ORT's CPU fallback off: it must not quietly retry a failing probe on the CPU EP alone
    session = create_session(
        proto.SerializeToString(), so, providers, purpose=PROBE, subject=device.name, device=device.name
    )
    if device.ep not in session.get_providers():
        raise ConfigError(
            f"{device.name} cannot create a session: ONNX Runtime dropped {device.ep}, over a provider option "
            f"it refuses or a device it cannot open ({providers[0][1]}); check the config for {device.name} "
            "(ONNX Runtime's log says which: hetero --debug, or onnxruntime.set_default_logger_severity(2))"
        )
    return session


def _loads(proto: onnx.ModelProto, model: Model, device: Device, probes: Probes | None) -> bool:
    """Whether ``device``'s EP creates a probe session of ``proto`` (ConfigError where ORT dropped it)."""
    try:
        _probe_session(proto, model, device, probes)
    except ORT_ERRORS as exc:  # refused: the caller probes the nodes another way
        log.debug("a probe of %s on %s failed: %s", model.name, device.name, failure_reason(exc))
        return False
    return True


def _halves(model: Model, device: Device, nodes: list[Node], probes: Probes | None) -> set[str]:
    mid = len(nodes) // 2
    return _claims(model, device, nodes[:mid], probes) | _claims(model, device, nodes[mid:], probes)


def greedy(model: Model, devices: Sequence[Device], probes: Probes | None = None) -> dict[str, str]:
    """Each non-constant node to the first device (priority order) that supports it; constants follow.

    Nodes no device supports are left out; constants take their first consumer's device. ``probes``: as
    for supported_nodes.
    """
    result: dict[str, str] = {}
    remaining = {n.friendly_name for n in _operations(model.get_ops())}
    for device in devices:
        if not remaining:
            break
        claims = claims_among(model, device, remaining, probes)
        for name in sorted(claims):
            result[name] = device.name
        remaining -= claims
    place_constants(model, result, devices[0].name)
    return {n.friendly_name: result[n.friendly_name] for n in model.get_ops() if n.friendly_name in result}


def claims_among(model: Model, device: Device, remaining: set[str], probes: Probes | None = None) -> set[str]:
    """What ``device`` claims of the ``remaining`` non-constant nodes an earlier device of a greedy query
    left (all of them where it is the first): supported_nodes, except that the CPU after a device that
    claimed some is probed on the nodes left alone (the CPU EP picks kernels by op and type: a probe of
    those nodes answers for them as the whole model's does, and costs a model of them, not the whole model
    again), and on the whole model only where that probe fails (it names the nodes the CPU EP lacks).
    ``probes``: as for supported_nodes."""
    operations = _operations(model.get_ops())
    if device.is_cpu and len(remaining) < len(operations):
        rest = [n for n in operations if n.friendly_name in remaining]
        try:
            proto = _piece(model, rest)
        except ModelError:
            proto = None
        if proto is not None and _rest_loads(proto, model, device, rest, probes):
            return set(remaining)
    return remaining & supported_nodes(model, device, probes)


def _rest_loads(
    proto: onnx.ModelProto, model: Model, device: Device, rest: list[Node], probes: Probes | None
) -> bool:
    """Whether the CPU EP loads ``proto``, the piece of the operations ``rest`` an earlier device left.

    Where the compile keeps the query's probes, no device's whole-model probe may already run the plan
    (runtime.one_session.whole_plan_probe), and ``rest`` is one connected piece (the one CPU subgraph of a plan, as
    a table recogniser's Loop is), the probe is created as a compile creates that subgraph's session
    (graph optimizations on, force_spinning_stop) and kept among ``probes.parts``: the compile uses it
    instead of creating the session again. Where that probe fails, the plain probe decides."""
    if probes is None or len(probes) or len(cut_after(model, rest, ())) != 1:
        return _loads(proto, model, device, probes)
    sess, providers, threads = _as_compiled(proto, model, device, probes, shared=True)
    if sess is None:  # an optimizer's failure the compile would meet too: the plain probe answers
        return _loads(proto, model, device, probes)
    record_output_types(model, sess)
    nodes = frozenset(n.friendly_name for n in rest)
    kept = Probe(providers, sess, assignment(sess), threads, shared=True, nodes=nodes)
    probes.parts.setdefault(device.name, []).append(kept)
    return True


def place_constants(model: Model, result: dict[str, str], default: str) -> None:
    """Each constant node of ``model`` into ``result`` ({friendly name: device}) on its first placed
    reader's device, ``default`` where none reads it."""
    consumers = model.consumers()
    for node in reversed(model.get_ops()):
        if not node.is_constant:
            continue
        readers = sorted(
            (r for t in node.outputs for r in consumers.get(t, ()) if r.friendly_name in result),
            key=lambda r: r.index,
        )
        result[node.friendly_name] = result[readers[0].friendly_name] if readers else default


def query_device(model: Model, device: Device, probes: Probes | None = None) -> dict[str, str]:
    """{friendly name: device} for what one device supports by itself (constants count as supported);
    ``probes``: as for supported_nodes."""
    claims = supported_nodes(model, device, probes)
    return {
        n.friendly_name: device.name for n in model.get_ops() if n.is_constant or n.friendly_name in claims
    }


def resolve_affinities(
    model: Model, request: DeviceRequest, devices: Sequence[Device], probes: Probes | None = None
) -> dict[str, str]:
    """The affinity of every node for a compile: manual if any node has one, else automatic (greedy);
    ``probes``: as for supported_nodes."""
    ops = model.get_ops()
    if not request.hetero:
        return {n.friendly_name: devices[0].name for n in ops}
    manual = model.affinities()
    if manual:
        return _check_manual(model, manual, request, devices)
    if _cpu_alone(request, devices):
        # nothing to choose: a probe would only be one session more (time, memory); should the compile's
        # session fail, check_supported names what the CPU EP lacks
        return {n.friendly_name: devices[0].name for n in ops}
    return check_supported(model, devices, probes)


def unprobed(request: DeviceRequest, devices: Sequence[Device], model: Model) -> bool:
    """Whether a compile places every node without a probe: HETERO over the CPU alone, no affinities."""
    return _cpu_alone(request, devices) and not model.affinities()


def _cpu_alone(request: DeviceRequest, devices: Sequence[Device]) -> bool:
    return request.hetero and len(devices) == 1 and devices[0].is_cpu


def check_supported(model: Model, devices: Sequence[Device], probes: Probes | None = None) -> dict[str, str]:
    """The greedy affinities; UnsupportedNodesError naming the nodes no device of ``devices`` supports.
    ``probes``: as for supported_nodes."""
    affinities = greedy(model, devices, probes)
    missing = [n for n in model.get_ops() if n.friendly_name not in affinities]
    if missing:
        # one small probe each: a broken node among ops no EP has is the model's fault
        for node in missing[:8]:
            _refused_as_invalid(model, node, probes)
        raise unsupported_nodes_error(
            model,
            missing,
            ", ".join(d.name for d in devices),
            ": add a device that does (CPU supports most ONNX ops) or set affinities by hand",
        )
    return affinities


def unsupported_nodes_error(
    model: Model, missing: Sequence[Node], devices: str, fix: str, *, listed: str | None = None
) -> UnsupportedNodesError:
    """The error for ``missing`` (nodes of ``model``) that no device of ``devices`` (their names, as the
    message shows them) supports: the nodes (``listed`` where the caller names them its own way), then
    ``fix`` (with its leading separator), then untyped_note's note. The one builder of this message."""
    what = _describe(missing) if listed is None else listed
    return UnsupportedNodesError(f"no device of {devices} supports {what}{fix}{untyped_note(model, missing)}")


def _untyped(t: onnx.TypeProto | None) -> bool:
    """No type at all, or a tensor type without an element type (sequences and maps are typed)."""
    return t is None or (t.WhichOneof("value") == "tensor_type" and not t.tensor_type.elem_type)


def untyped_note(model: Model, nodes: Sequence[Node]) -> str:
    """A message's note on those of ``nodes`` that could not be probed at all: they read a tensor whose
    element type nothing declares or infers (made by an op no device knows, say); '' if none do."""
    untyped = {}
    for node in nodes:
        for t in node.inputs:
            if t and t not in model.initializer_names and _untyped(model.value_type(t)):
                untyped.setdefault(node.friendly_name, t)
    if not untyped:
        return ""
    shown = _few(f"{n} reads {t!r}" for n, t in untyped.items())
    return (
        f" ({shown}, whose type nothing declares or infers, so no device could be asked: declare it in the "
        "model's value_info)"
    )


def _refused_as_invalid(model: Model, node: Node, probes: Probes | None) -> None:
    """ModelError where the CPU EP refuses ``node`` because the model breaks ONNX's rules (an attribute
    its op lacks...), which no device would fix."""
    try:
        piece = _piece(model, [node])
    except ModelError:  # its inputs have no type to probe it with: the caller's message says so
        return
    try:
        _probe_session(piece, model, lookup("CPU"), probes)
    except ORT_ERRORS as exc:  # only a refusal that blames the model is raised; others are the EP's
        refused = refused_model(f"{node.friendly_name} ({node.get_type_name()})", exc)
        if refused is not None:
            raise refused from None


def _check_manual(
    model: Model, manual: Mapping[str, str], request: DeviceRequest, devices: Sequence[Device]
) -> dict[str, str]:
    listed = {d.name for d in request.priorities}
    usable = {d.name for d in devices}
    resolved: dict[str, str] = {}
    unknown: list[str] = []
    outside: list[str] = []
    absent: list[str] = []
    for name, value in manual.items():
        dev = canonical_name(value)
        if dev is None:
            unknown.append(f"{name}={value}")
            continue
        if dev not in listed:
            outside.append(f"{name}={dev}")
        elif dev not in usable:
            absent.append(f"{name}={dev}")
        resolved[name] = dev
    missing = [n for n in model.get_ops() if n.friendly_name not in manual]
    problems = []
    if missing:
        problems.append(f"{len(missing)} node(s) have no affinity ({_describe(missing)})")
    if unknown:
        problems.append(f"unknown device in {_few(unknown)}")
    if outside:
        order = ",".join(d.name for d in request.priorities)
        problems.append(f"device not in the priority list {order} in {_few(outside)}")
    if absent:
        problems.append(f"device not available on this machine in {_few(absent)}")
    if problems and missing:
        raise AffinityError(
            "affinities were set by hand, so automatic mode is off and every node needs one naming a device "
            f"of {request}: " + "; ".join(problems) + ". Set them all (query_model gives a starting map) "
            "or clear them all to use automatic mode"
        )
    if problems:
        order = ", ".join(d.name for d in devices)
        fixes = []
        if unknown or outside:
            fixes.append(f"list the device in {request}")
        if absent:
            fixes.append("run where the device is available")
        raise AffinityError(
            "the affinities set by hand must name devices of "
            f"{request}: " + "; ".join(problems) + f". Use {order}, or " + " or ".join(fixes)
        )
    return {n.friendly_name: resolved[n.friendly_name] for n in model.get_ops()}


def _few(items: Iterable[str], limit: int = 8) -> str:
    items = list(items)
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _describe(nodes: Sequence[Node]) -> str:
    return _few(f"{n.friendly_name} ({n.get_type_name()})" for n in nodes)
