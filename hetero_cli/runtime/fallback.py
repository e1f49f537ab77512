"""HETERO_FALLBACK: a subgraph whose session fails to compile, or fails its first inference, on its device
moves to the next device of the priority list that supports its nodes (usually CPU), with one warning.

The execution providers fail on some valid subgraphs (the quirks record has the known ones); a user then
had to find a cut that works by trial. With fallback on (the default in automatic mode; manual mode honours
the affinities unless HETERO_FALLBACK=YES is set) the compile, or the first inference, finds it:

- at compile time (compiler.compile_with_fallback, with ``move_at_compile`` here) the failing subgraph's nodes take the next device and the
  model is partitioned again: the moved nodes join their new device's neighbours, the plan (and so
  EXECUTION_DEVICES, the counters, the .dot files) shows where they went;
- at the first inference (``settle``, from the executor through CompiledModel.fall_back) the subgraphs'
  sessions are run in order on the same inputs; the failing one is compiled for the next device in place
  (its boundaries stay as they are) in the compiled model's next revision, swapped in for new inferences
  (requests in flight finish on theirs), and the inference starts over on it, so the caller gets the
  right outputs from the same ``infer()``. A subgraph that once completed an inference never moves: a later failure is the
  input's. A failure no device can take stays an error naming every device tried.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import CompileError, InferenceError
from ..graph import Model
from ..ort import values as ortv
from ..ort.failures import ep_cause, failure_reason
from ..placement import visualize
from ..placement.config import FALLBACK
from ..placement.devices import Device
from ..placement.partition import Plan, Subgraph, partition
from ..placement.query import known_claims, supported_nodes
from .failures import known_defect
from .shape_check import contradiction
from .steps import step_feeds, steps_of

if TYPE_CHECKING:
    from .compiled_model import CompiledModel, CompiledSubgraph
    from .revision import Revision

log = logging.getLogger("hetero_cli")

COMPILE = "failed to compile"
FIRST_INFERENCE = "failed its first inference"


@dataclass(frozen=True)
class Move:
    """One subgraph HETERO_FALLBACK moved: ``subgraph`` (its name where it failed), its ``nodes``, the
    device it ``left`` and the one it went ``to``, the EP's ``reason`` in one line, the ``quirk`` id of the
    known EP defect behind it (None if none is known), and the ``stage`` it failed at (COMPILE or
    FIRST_INFERENCE)."""

    subgraph: str
    nodes: tuple[str, ...]
    left: str
    to: str
    reason: str
    quirk: str | None
    stage: str

    @property
    def message(self) -> str:
        """The one warning line a user sees for this move."""
        known = f" (known EP defect {self.quirk}, docs/limits.md)" if self.quirk else ""
        return (
            f"HETERO_FALLBACK: {self.subgraph} ({len(self.nodes)} node(s)) {self.stage} on {self.left}"
            f"{known}: {ep_cause(self.reason)}; it runs on {self.to} instead"
        )


@dataclass
class Fallback:
    """A compile's fallback: whether it is ``enabled``, whether the affinities were set by hand
    (``manual``), the priority list (``devices``, in order) and the ``moves`` made so far."""

    enabled: bool
    manual: bool
    devices: tuple[Device, ...]
    moves: list[Move] = field(default_factory=list)

    def next_devices(self, model: Model, nodes: Sequence[str], left: str) -> list[Device]:
        """The devices after ``left`` in the priority list that support every one of ``nodes`` (what
        their EP claims in a query of the model; the CPU EP is probed too)."""
        names = [d.name for d in self.devices]
        after = self.devices[names.index(left) + 1 :] if left in names else ()
        wanted = set(nodes)
        return [d for d in after if wanted <= _claims(model, d)]

    def hint(self, model: Model, nodes: Sequence[str], left: str) -> str:
        """Advice for the error of a subgraph that failed with fallback off: where HETERO_FALLBACK=YES
        would move it, or "" where no later device supports its nodes."""
        if self.enabled:
            return ""
        targets = self.next_devices(model, nodes, left)
        if not targets:
            return ""
        return (
            f"; {FALLBACK}=YES would move it to {targets[0].name} (the next device that supports its nodes)"
        )


def _claims(model: Model, device: Device) -> frozenset[str]:
    """What ``device`` supports in ``model``: the query's answer where one probed it, else a probe now."""
    claimed = known_claims(model, device)
    return claimed if claimed is not None else supported_nodes(model, device)


def _exhausted(subgraph: Subgraph, stage: str, tried: Sequence[tuple[str, str]]) -> str:
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
) -> Plan:
    """The plan with ``failed``'s nodes (its session failed to compile with ``exc``) on the next device
    that supports them, partitioned again; ``tried``: {node: [(device, reason)]} failures so far, updated.
    CompileError naming every device tried where no later device supports them all."""
    left = exc.device
    assert left is not None
    reason = exc.reason or str(exc)
    history = [*dict.fromkeys(t for n in failed.nodes for t in tried.get(n, ())), (left, reason)]
    for n in failed.nodes:
        tried.setdefault(n, []).append((left, reason))
    done = {device for device, _ in history}
    targets = [d for d in fallback.next_devices(model, failed.nodes, left) if d.name not in done]
    if not targets:
        raise CompileError(_exhausted(failed, COMPILE, history), subgraph=failed.name, device=left) from None
    target = targets[0]
    move = Move(
        failed.name,
        failed.nodes,
        left,
        target.name,
        reason,
        known_defect(_device(fallback, left).ep, reason),
        COMPILE,
    )
    log.warning("%s", move.message)
    fallback.moves.append(move)
    return partition(model, {**plan.affinities, **dict.fromkeys(failed.nodes, target.name)})


def _device(fallback: Fallback, name: str) -> Device:
    return next(d for d in fallback.devices if d.name == name)


def may_move(compiled: CompiledModel, failed: CompiledSubgraph) -> bool:
    """Whether a run-time failure of ``failed`` is for ``settle``: fallback is on and it never completed
    an inference (or it was moved already, for another request)."""
    fallback = compiled.fallback
    return (
        fallback is not None
        and fallback.enabled
        and not failed.proven
        and bool(fallback.devices)
        and failed.device != fallback.devices[-1].name  # a device comes after it
    )


def settle(
    compiled: CompiledModel,
    current: Revision,
    failed: CompiledSubgraph,
    cause: BaseException,
    values: Mapping[str, Any],
) -> Revision | None:
    """After ``failed`` (of revision ``current``) failed its first inference with ``cause``: run the
    subgraphs' sessions in order on the inference's model inputs (in ``values``), compiling each that
    fails for the next device that supports its nodes; the revision after ``current`` that runs them
    (its .dot files drawn again where ``current``'s were), for CompiledModel.fall_back to swap in. Called
    with the compiled model's change lock held; ``current`` and the requests running it are left as they are.

    None when fallback does not apply (the caller raises its error). InferenceError naming every device
    tried where a subgraph fails on all of them (nothing changes then). A revision that ran its subgraphs
    in one session (Revision.one_session) is followed by one with a session per subgraph, whether or not
    one of them then moves.
    """
    if not may_move(compiled, failed):
        return None
    fallback = compiled.fallback
    assert fallback is not None
    model, plan, one = compiled.model, current.plan, current.one_session
    if not one and not fallback.next_devices(model, failed.nodes, failed.device):
        return None  # nowhere to go: the caller's error is the failure itself
    subgraphs, runs, moves = _moved(compiled, current, fallback, values)
    moved = {n: m.to for m in moves for n in m.nodes}
    new_plan = dataclasses.replace(plan, subgraphs=tuple(subgraphs), affinities={**plan.affinities, **moved})
    # drawn again where they were: they show where the nodes run now (a failure to write them is raised
    # before anything changes)
    dots = visualize.dump(model, new_plan, compiled.config.dot_dir) if current.dot_files else None
    if one and not moves:
        log.warning(
            "the one ONNX Runtime session of the split failed its first inference (%s): its %d subgraphs "
            "run in sessions of their own from now on",
            ep_cause(cause),
            len(subgraphs),
        )
    for move in moves:
        log.warning("%s", move.message)
    fallback.moves.extend(moves)
    return current.next(model, runs, plan=new_plan, dot_files=dots)


def _moved(
    compiled: CompiledModel, current: Revision, fallback: Fallback, values: Mapping[str, Any]
) -> tuple[list[Subgraph], list[CompiledSubgraph], list[Move]]:
    """``current``'s subgraphs run in order on the model inputs in ``values``, each that fails compiled for
    the next device that supports its nodes: the plan's subgraphs (devices as moved), their sessions and
    the moves. InferenceError naming every device tried where a subgraph fails on all of them."""
    model, one = compiled.model, current.one_session
    by_name = {d.name: d for d in fallback.devices}
    runs: list[CompiledSubgraph | None] = [None if one else c for c in current.subgraphs]
    fed = {*model.input_names, *model.overridable_initializers}
    tensors = {name: value for name, value in values.items() if name in fed}
    tried: dict[int, list[tuple[str, str]]] = {}
    moves: list[Move] = []
    subgraphs = list(current.plan.subgraphs)
    shared = len(subgraphs) > 1
    i = 0
    while i < len(subgraphs):
        s = subgraphs[i]
        device = by_name[s.device]
        try:
            run = runs[i]
            if run is None:
                run = compiled.prepare(s, device, shared=shared)
            tensors.update(_trial(compiled, current.plan, run, tensors))
        except Exception as exc:
            reason = exc.reason if isinstance(exc, CompileError) and exc.reason else failure_reason(exc)
            history = tried.setdefault(i, [])
            history.append((s.device, reason))
            done = {name for name, _ in history}
            targets = [d for d in fallback.next_devices(model, s.nodes, s.device) if d.name not in done]
            if not targets:
                raise InferenceError(_exhausted(s, FIRST_INFERENCE, history)) from None
            moves.append(
                Move(
                    s.name,
                    s.nodes,
                    s.device,
                    targets[0].name,
                    reason,
                    known_defect(device.ep, reason),
                    FIRST_INFERENCE,
                )
            )
            subgraphs[i] = dataclasses.replace(s, device=targets[0].name)
            runs[i] = None
            continue
        runs[i] = run
        i += 1
    return subgraphs, [r for r in runs if r is not None], moves


def _trial(
    compiled: CompiledModel, plan: Plan, run: CompiledSubgraph, tensors: Mapping[str, Any]
) -> dict[str, Any]:
    """Run one subgraph's session on ``tensors`` (model inputs and earlier subgraphs' outputs): its
    outputs by name, in host memory. Raises what ORT raises, and InferenceError for an output in a shape
    that contradicts ONNX Runtime's inference (shape_check)."""
    (step,) = steps_of(compiled.model, plan, [run])
    produced = ortv.run(
        run.session, step.output_list, step_feeds(step, tensors), plain=step.plain, placement=()
    )
    outputs = dict(zip(step.outputs, produced, strict=True))
    problem = contradiction(step, outputs, compiled.model)
    if problem is not None:  # a wrong shape is a failure too (openvino-attention-output-shape)
        raise InferenceError(problem)
    return outputs
