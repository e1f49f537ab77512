"""HETERO_FALLBACK: a subgraph whose session fails to compile, or fails its first inference, on its device
moves to the next device of the priority list that supports its nodes (usually CPU), with one warning.

The execution providers fail on some valid subgraphs (the quirks record has the known ones); a user then
had to find a cut that works by trial. With fallback on (the default in automatic mode; manual mode honours
the affinities unless HETERO_FALLBACK=YES is set) the compile, or the first inference, finds it:

- at compile time (compiler.compile_with_fallback, with ``move_at_compile`` here) the failing subgraph's
  nodes take the next device and the model is partitioned again: the moved nodes join their new device's
  neighbours, the plan (and so EXECUTION_DEVICES, the counters, the .dot files) shows where they went;
- at the first inference (runtime.recovery, the request side) the subgraphs' sessions are run in order on
  the same inputs; the failing one is compiled for the next device (replacing.session_for; its boundaries
  stay as they are) in the compiled model's next revision (replacing.moved), swapped in for new
  inferences (requests in flight finish on theirs), and the inference starts over on it, so the caller
  gets the right outputs from the same ``infer()``. A subgraph that once completed an inference never
  moves: a later failure is the input's. A failure no device can take stays an error naming every
  device tried.

This module holds the policy (``Fallback``: on or off, manual or not, the priority list) and the
compile-time move; the moves made are the compiled model's revision's (Revision.moves).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import CompileError
from ..graph import Model
from ..ort.failures import ep_cause
from ..placement.config import FALLBACK
from ..placement.devices import Device
from ..placement.partition import Plan, Subgraph, partition
from ..placement.query import known_claims, supported_nodes
from ..quirks import known_defect
from .compiled_subgraph import CompiledSubgraph
from .revision import COMPILE, Move

log = logging.getLogger("hetero_cli")


@dataclass(frozen=True)
class Fallback:
    """A compile's fallback policy: whether it is ``enabled``, whether the affinities were set by hand
    (``manual``) and the priority list (``devices``, in order)."""

    enabled: bool
    manual: bool
    devices: tuple[Device, ...]

    def next_devices(
        self, model: Model, nodes: Sequence[str], left: str, *, probe: bool = True
    ) -> list[Device]:
        """The devices after ``left`` in the priority list that support every one of ``nodes`` (what
        their EP claims in a query of the model; the CPU EP is probed too). ``probe`` False: only what a
        query already found (no session is made: an inference's error asks so)."""
        names = [d.name for d in self.devices]
        after = self.devices[names.index(left) + 1 :] if left in names else ()
        wanted = set(nodes)
        return [d for d in after if wanted <= _claims(model, d, probe)]

    def hint(self, model: Model, nodes: Sequence[str], left: str, *, probe: bool = True) -> str:
        """Advice for the error of a subgraph that failed with fallback off: where HETERO_FALLBACK=YES
        would move it, or "" where no later device supports its nodes. ``probe`` False (an inference's
        error: no session is made then): what a query already knows, else the next device of the
        priority list it would try."""
        if self.enabled:
            return ""
        targets = self.next_devices(model, nodes, left, probe=probe)
        if targets:
            return (
                f"; {FALLBACK}=YES would move it to {targets[0].name} (the next device that supports its "
                "nodes)"
            )
        names = [d.name for d in self.devices]
        after = names[names.index(left) + 1 :] if left in names else []
        if probe or not after or any(known_claims(model, d) is not None for d in self.devices[-len(after) :]):
            return ""
        return f"; {FALLBACK}=YES would try it on {after[0]} next (the next device of the priority list)"

    def may_move(self, failed: CompiledSubgraph, proven: bool) -> bool:
        """Whether a run-time failure of ``failed`` (``proven``: it completed an inference before) is for
        HETERO_FALLBACK to settle: fallback is on, it never completed an inference, and a device comes
        after its own."""
        return self.enabled and not proven and bool(self.devices) and failed.device != self.devices[-1].name


def _claims(model: Model, device: Device, probe: bool = True) -> frozenset[str]:
    """What ``device`` supports in ``model``: the query's answer where one probed it, else a probe now
    (with ``probe``; else nothing)."""
    claimed = known_claims(model, device)
    if claimed is not None:
        return claimed
    return supported_nodes(model, device) if probe else frozenset()


def exhausted(subgraph: Subgraph, stage: str, tried: Sequence[tuple[str, str]]) -> str:
    """The message where ``subgraph`` failed (at ``stage``) on every device that supports its nodes."""
    listed = "; ".join(f"{device}: {ep_cause(reason)}" for device, reason in tried)
    return (
        f"{subgraph.name} ({len(subgraph.nodes)} node(s)) {stage} on every device that supports its nodes "
        f"({listed}); move its nodes by hand (affinities) or change the devices' config"
    )


def move_at_compile(
    model: Model,
    plan: Plan,
    failed: Subgraph,
    exc: CompileError,
    fallback: Fallback,
    tried: dict[str, list[tuple[str, str]]],
    moves: list[Move],
) -> Plan:
    """The plan with ``failed``'s nodes (its session failed to compile with ``exc``) on the next device
    that supports them, partitioned again; ``tried``: {node: [(device, reason)]} failures so far, and
    ``moves``, the moves made so far, updated. CompileError naming every device tried where no later
    device supports them all."""
    left = exc.device
    assert left is not None
    reason = exc.reason or str(exc)
    history = [*dict.fromkeys(t for n in failed.nodes for t in tried.get(n, ())), (left, reason)]
    for n in failed.nodes:
        tried.setdefault(n, []).append((left, reason))
    done = {device for device, _ in history}
    targets = [d for d in fallback.next_devices(model, failed.nodes, left) if d.name not in done]
    if not targets:
        raise CompileError(exhausted(failed, COMPILE, history), subgraph=failed.name, device=left) from None
    target = targets[0]
    move = Move(
        failed.name,
        failed.nodes,
        left,
        target.name,
        reason,
        known_defect(device_named(fallback, left).ep, reason),
        COMPILE,
    )
    log.warning("%s", move.message)
    moves.append(move)
    moved = {**plan.affinities, **dict.fromkeys(failed.nodes, target.name)}
    return partition(model, moved, branches=plan.branches)


def device_named(fallback: Fallback, name: str) -> Device:
    """The device of ``fallback``'s priority list named ``name``."""
    return next(d for d in fallback.devices if d.name == name)
