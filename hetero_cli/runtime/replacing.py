"""The compile side's part in what a run reveals: the next revision of a compiled model, built off to the
side from the current one, for the request side to swap in (Compiled.advance).

- ``relaxed``: a session refused a tensor an earlier subgraph made (the model declared another shape):
  the subgraphs that pass it compiled again with those dimensions dynamic, from a copy of the model with
  that type corrected (type_repair.relaxed_types); the caller's Model is never touched.
- ``session_for``: one subgraph's session on a device, with the compile's config (a HETERO_FALLBACK move
  at run time: runtime.recovery runs the trial and asks for these).
- ``moved``: the revision after HETERO_FALLBACK's trial: the plan with the moved subgraphs' devices, their
  sessions, the moves, and the .dot files drawn again where the current ones were.

Nothing here runs an inference: the request side runs, and asks.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence

from ..errors import HeteroError
from ..graph import Model
from ..placement import visualize
from ..placement.devices import Device
from ..placement.partition import Subgraph
from ..placement.schedule import on_host, schedule_of
from . import type_repair
from .compiled import Compiled
from .compiled_subgraph import CompiledSubgraph
from .compiler import prepare_subgraph
from .revision import Move, Revision

log = logging.getLogger("hetero_cli")


def relaxed(
    compiled: Compiled,
    current: Revision,
    refused: Mapping[str, tuple[int, ...] | None],
    failed: CompiledSubgraph,
) -> Revision | None:
    """The revision after ``current`` in which every subgraph that passes a tensor ``failed`` refused at
    run time (``refused``: {tensor: the dimensions it refused, None for the rank}) is compiled again with
    those dimensions dynamic, or None where nothing is left to relax (the refusal stands) or compiling
    again failed (its reason logged).

    The model said the tensor has a shape (its value_info, or onnx's shape inference, which differs from
    ONNX Runtime's kernels in places: MaxPool with ceil_mode, ConvTranspose with SAME padding) that the
    producing subgraph did not make; one ORT session over the whole model only warns, so a split runs it
    too. What is relaxed is the type ``failed``'s session declares, whatever gave it.
    """
    if current.one_session:
        return None
    relaxed_types = type_repair.relaxed_types(failed.session.get_inputs(), refused)
    if not relaxed_types:
        return None
    model = current.model.typed_copy()  # this revision's own: the current one's stays as it was
    type_repair.correct(model, relaxed_types)
    type_repair.warn_relaxed(relaxed_types, refused)
    try:
        fresh = [
            session_for(compiled, current, c.subgraph, c.target, model)
            if relaxed_types.keys() & {*c.inputs, *c.outputs}
            else c
            for c in current.subgraphs
        ]
    except HeteroError as exc:  # CompileError, ModelError: the refusal stands, with this reason beside it
        log.warning("the subgraphs could not be compiled again: %s", exc)
        return None
    return current.next(fresh, model=model)


def session_for(
    compiled: Compiled,
    revision: Revision,
    subgraph: Subgraph,
    device: Device,
    model: Model | None = None,
) -> CompiledSubgraph:
    """A session of ``subgraph`` (of ``revision``'s plan) on ``device``, with the compile's config and
    ``revision``'s schedule, compiled from ``model`` (``revision``'s by default; ``relaxed``'s copy with the
    relaxed types): a HETERO_FALLBACK move's, or a relax's. Raises CompileError (or ModelError) where none
    can be made."""
    shared = len(revision.plan.subgraphs) > 1
    return prepare_subgraph(
        revision.model if model is None else model,
        subgraph,
        device,
        compiled.config,
        compiled.profile_dir,
        None,
        shared=shared,
        schedule=revision.schedule,
    )()


def moved(
    compiled: Compiled,
    current: Revision,
    subgraphs: Sequence[Subgraph],
    runs: Sequence[CompiledSubgraph],
    moves: Sequence[Move],
) -> Revision:
    """The revision after ``current`` that HETERO_FALLBACK's trial settled on: the plan's ``subgraphs``
    (devices as moved), their sessions (``runs``, one each) and the ``moves`` made, each warned about;
    its .dot files drawn again where ``current``'s were (a failure to write them is raised before
    anything changes)."""
    plan = current.plan
    to = {n: m.to for m in moves for n in m.nodes}
    new_plan = dataclasses.replace(plan, subgraphs=tuple(subgraphs), affinities={**plan.affinities, **to})
    schedule = None
    if current.schedule is not None:  # the moved subgraphs may run at once with others now; the sessions
        # keep the threads they were made with (the moved ones' were made under the current schedule)
        host = [d.name for d in compiled.fallback.devices if on_host(d)]
        fresh = schedule_of(new_plan, host, compiled.config.concurrency, current.schedule.cores)
        schedule = dataclasses.replace(fresh, threads=current.schedule.threads)
    together = schedule.side_by_side if schedule is not None else ()
    dots = None
    if current.dot_files:
        dots = visualize.dump(current.model, new_plan, compiled.config.dot_dir, together)
    for move in moves:
        log.warning("%s", move.message)
    return current.next(runs, plan=new_plan, moves=moves, dot_files=dots, schedule=schedule)
