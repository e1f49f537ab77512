"""What a failed run means, and what the request does about it: the one place a StepFailure is read.

- a session refused the shape of a tensor an earlier subgraph made (the model declared another): the
  subgraphs that pass it are compiled again with it dynamic (replacing.relaxed);
- a pre-bound run failed: the step runs again unbound on the same inputs; outputs in other shapes than
  its session declares (and than ONNX Runtime infers) mean the declaration was wrong: from then on its
  outputs are made per inference (Revision.unbinding). A success in exactly the declared shapes cannot
  explain the bound failure (the OpenVINO EP answers a failed input again with the last inference's
  outputs: quirk openvino-stale-output-after-failure), so the first failure stands;
- a real failure of a subgraph that never completed an inference, with HETERO_FALLBACK on: the subgraphs
  run in order on the inference's inputs, each that fails compiled for the next device that supports
  its nodes (replacing.session_for), and that revision swapped in (replacing.moved);
- otherwise the caller's InferenceError, naming the subgraph, its device and ORT's reason (and where
  HETERO_FALLBACK=YES would move it); a session whose EP keeps a failed run's state is made again first
  (runtime.renewal), so the next inference is right. Where another request made it again already, the
  failure may be the state that request's failed run left, and the inference starts over on the fresh
  session instead.

Each new revision is built off to the side and swapped in whole (Compiled.advance); ``recover`` returns
where the caller should start the inference over on the current revision, and raises otherwise.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from ..errors import CompileError, HeteroError, InferenceError
from ..ort.failures import ep_cause, failure_reason
from ..ort.session import ORT_ERRORS, ORT_RUN_ERRORS
from ..placement.partition import Plan
from ..quirks import known_defect
from . import renewal, replacing
from .compiled import Compiled
from .compiled_subgraph import CompiledSubgraph
from .failures import StepFailure, failure
from .fallback import device_named, exhausted
from .revision import FIRST_INFERENCE, Move, Revision
from .shape_check import contradiction
from .steps import Step, step_feeds, steps_of
from .walk import Walk, as_declared, run_session

log = logging.getLogger("hetero_cli")


def recover(compiled: Compiled, walk: Walk, failed: StepFailure, feeds: Mapping[str, Any]) -> None:
    """After ``failed`` (a run of an inference on the model inputs ``feeds``, by ``walk``): return where
    the compiled model's current revision now runs the inference right (a new one swapped in, now or
    by another request: the caller starts over on it); raise the caller's InferenceError where the
    failure is the input's or no device can take it."""
    step = failed.step
    run = step.compiled
    refused = failed.refused or walk.refused(step, failed.cause)
    if refused:
        if compiled.advance(run, lambda current: replacing.relaxed(compiled, current, refused, run)):
            return
        _renew(compiled, run, failed.cause)
        raise _error(compiled, step, failed.cause)
    cause = failed.cause
    if failed.bound:
        found = _unbound_rerun(walk, step, failed)
        if found is None:
            _unbind(compiled, step)
            return
        cause = found
    if compiled.fallback.may_move(run, compiled.proven(run)) and _fall_back(
        compiled, walk, run, cause, feeds
    ):
        return
    if _renew(compiled, run, cause):
        return  # another request's failed run left this session's state: start over on the fresh one
    raise _error(compiled, step, cause)


def _unbound_rerun(walk: Walk, step: Step, failed: StepFailure) -> BaseException | None:
    """What a pre-bound step's failure was: its run again with nothing pre-bound on the same inputs gives
    None where its outputs came back in other shapes than declared (the declaration was wrong), else the
    failure that stands: the rerun's own, a shape ONNX Runtime's inference contradicts, or ``failed``'s
    where the rerun gave exactly the declared shapes (which cannot explain it)."""
    values = failed.values or {}
    try:
        produced = run_session(step, step.compiled.session, step_feeds(step, values))
    except ORT_RUN_ERRORS as exc:
        return exc
    if as_declared(step, produced):
        return failed.cause  # quirk openvino-stale-output-after-failure: the first failure stands
    # a wrong shape is the EP's mistake, not a declared one's (openvino-attention-output-shape)
    problem = contradiction(
        step.outputs, step.shapes, dict(zip(step.outputs, produced, strict=True)), walk.model
    )
    if problem is not None:
        return InferenceError(problem)
    return None


def _unbind(compiled: Compiled, step: Step) -> None:
    """From now on ``step``'s outputs are made per inference (the next revision says so)."""
    compiled.advance(
        step.compiled,
        lambda current: None if step.position in current.unbound else current.unbinding(step.position),
    )
    log.debug("%s: output shapes differ from the declared ones; made per inference", step.compiled.where)


def _error(compiled: Compiled, step: Step, cause: BaseException) -> InferenceError:
    """The caller's InferenceError for ``step``'s failure ``cause``, saying where HETERO_FALLBACK=YES would
    move the subgraph where it is off and the subgraph never completed an inference (as far as a query
    already knows: no probe is made)."""
    error = failure(step, cause)
    if compiled.proven(step.compiled):
        return error
    model = compiled.current().model
    hint = compiled.fallback.hint(model, step.compiled.nodes, step.compiled.device, probe=False)
    return InferenceError(str(error) + hint) if hint else error


def _renew(compiled: Compiled, run: CompiledSubgraph, cause: BaseException) -> bool:
    """Where ``run``'s EP keeps a failed run's state (renewal.applies), swap in the revision with its
    session made again; where that cannot be made now, record why (a server is not ready then). True
    where another request had swapped such a revision in already: ``run`` had failed for it, and this
    failure may be the state that run left (quirk openvino-failed-shape-kept: one client's bad input
    failed others' valid ones in flight), so the inference is to start over on the fresh session."""
    if not renewal.applies(run, cause):
        return False
    reason: str | None = None
    built = False

    def build(current: Revision) -> Revision | None:
        nonlocal reason, built
        built = True
        try:
            following = renewal.renewed(current, run, cause)
        except ORT_ERRORS as exc:  # the device will not take it now: the next inference meets the old one
            reason = ep_cause(exc)
            log.warning("%s could not be made again after its failed run: %s", run.where, reason)
            return None
        if following is not None and compiled.proven(run):  # the same subgraph, proven on its device
            compiled.prove(c for c in (*following.runs, *following.subgraphs) if not current.holds(c))
        return following

    compiled.advance(run, build)
    compiled.note_unrenewed(run.where, reason)
    return not built


def _fall_back(
    compiled: Compiled, walk: Walk, failed: CompiledSubgraph, cause: BaseException, feeds: Mapping[str, Any]
) -> bool:
    """HETERO_FALLBACK at run time, after ``failed`` failed its first inference with ``cause``: the
    revision the trial settles on swapped in (True: the caller starts over), or False where no device
    comes after its own that supports its nodes (the caller's error is the failure itself). Raises
    InferenceError naming every device tried where a subgraph fails on all of them (nothing changes)."""

    def build(current: Revision) -> Revision | None:
        one = current.one_session
        if not one and not compiled.fallback.next_devices(current.model, failed.nodes, failed.device):
            return None  # nowhere to go
        subgraphs, runs, moves = _trial(compiled, walk, current, feeds)
        if one and not moves:
            log.warning(
                "the one ONNX Runtime session of the split failed its first inference (%s): its %d subgraphs "
                "run in sessions of their own from now on",
                ep_cause(cause),
                len(subgraphs),
            )
        return replacing.moved(compiled, current, subgraphs, runs, moves)

    return compiled.advance(failed, build)


def _trial(
    compiled: Compiled, walk: Walk, current: Revision, feeds: Mapping[str, Any]
) -> tuple[list[Any], list[CompiledSubgraph], list[Move]]:
    """``current``'s subgraphs run in order on the model inputs (``feeds``), each that fails compiled for
    the next device that supports its nodes: the plan's subgraphs (devices as moved), their sessions and
    the moves. InferenceError naming every device tried where a subgraph fails on all of them."""
    fallback = compiled.fallback
    model, plan, one = current.model, current.plan, current.one_session
    runs: list[CompiledSubgraph | None] = [None if one else c for c in current.subgraphs]
    fed = {*model.input_names, *model.overridable_initializers}
    tensors = {name: value for name, value in walk.values(feeds, None).items() if name in fed}
    tried: dict[int, list[tuple[str, str]]] = {}
    moves: list[Move] = []
    subgraphs = list(plan.subgraphs)
    i = 0
    while i < len(subgraphs):
        s = subgraphs[i]
        device = device_named(fallback, s.device)
        try:
            run = runs[i]
            if run is None:
                run = replacing.session_for(compiled, current, s, device)
            tensors.update(_trial_run(walk, current, plan, run, tensors))
        except (HeteroError, *ORT_RUN_ERRORS) as exc:  # this device fails the subgraph: the next one tries
            reason = exc.reason if isinstance(exc, CompileError) and exc.reason else failure_reason(exc)
            history = tried.setdefault(i, [])
            history.append((s.device, reason))
            done = {name for name, _ in history}
            targets = [d for d in fallback.next_devices(model, s.nodes, s.device) if d.name not in done]
            if not targets:
                raise InferenceError(exhausted(s, FIRST_INFERENCE, history)) from None
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


def _trial_run(
    walk: Walk, current: Revision, plan: Plan, run: CompiledSubgraph, tensors: Mapping[str, Any]
) -> dict[str, Any]:
    """One subgraph's session run on ``tensors`` (model inputs and earlier subgraphs' outputs), by the one
    runner (walk.run_session): its outputs by name, in host memory. Raises what ORT raises, and
    InferenceError for an output in a shape that contradicts ONNX Runtime's inference (shape_check)."""
    (step,) = steps_of(current.model, plan, [run])
    if step.on_device:
        step = dataclasses.replace(step, on_device=False)  # read here: to host memory
    produced = run_session(step, run.session, step_feeds(step, tensors))
    outputs = dict(zip(step.outputs, produced, strict=True))
    problem = contradiction(step.outputs, step.shapes, outputs, current.model)
    if problem is not None:  # a wrong shape is a failure too (openvino-attention-output-shape)
        raise InferenceError(problem)
    return outputs
