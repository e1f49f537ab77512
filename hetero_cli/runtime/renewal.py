"""Renewal: a session whose run failed inside an execution provider that keeps a failed run's state is made
again, so that one failed inference never changes the answer to the next.

The OpenVINO EP keeps the shape of a run that failed inside it (quirk openvino-failed-shape-kept): after a
zero batch failed a MaxPool, every run in the last good shape failed the same way, for every request of the
compiled model (a served split refused every valid request after one bad one). Where the installed release
has that defect, the failed session is made again (the same model, options and providers:
ort.session.fresh_session) off to the side, and the compiled model's next revision, with it in place of the
failed one, is swapped in before the failure reaches the caller (runtime.recovery); a request in flight
keeps the revision it started with. Other EPs' sessions are left as they are: the CPU EP's runs after a
failed one are right (tests/quirks/test_openvino_limits.py), and making a session again costs a compile.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from ..ort.failures import ep_cause
from ..ort.session import ORT_ERRORS, fresh_session
from ..quirks import in_force
from ..quirks.openvino import FAILED_SHAPE_KEPT
from .profiling import SessionProfile

if TYPE_CHECKING:
    from .compiled_subgraph import CompiledSubgraph
    from .revision import Revision

log = logging.getLogger("hetero_cli")


def applies(failed: CompiledSubgraph, cause: BaseException) -> bool:
    """Whether ``failed``'s session is to be made again after ``cause``: ONNX Runtime's own failure of a run
    (not one of hetero-cli's checks) on an EP that keeps a failed run's state, on a release that has that
    defect."""
    return (
        isinstance(cause, ORT_ERRORS)
        and failed.target.ep == FAILED_SHAPE_KEPT.ep
        and in_force(FAILED_SHAPE_KEPT)
    )


def renewed(current: Revision, failed: CompiledSubgraph, cause: BaseException) -> Revision | None:
    """The revision after ``current`` in which ``failed``'s session (that of every subgraph and run of
    ``current`` that shares it: a split ORT runs in one session) is a fresh one made as it was; None
    where hetero-cli has no record of how it was made. Raises ORT_ERRORS where the device will not make
    it now (the caller records why: the next inference meets the old session)."""
    session = failed.profiler.session if failed.profiler is not None else failed.session
    made = fresh_session(session)  # a profiled one profiles its runs anew, into a trace of its own
    if made is None:  # a session hetero-cli did not create (a test's): nothing to make it from
        log.debug("%s: no record of how its session was made; it is not made again", failed.where)
        return None
    fresh = {}
    for compiled in (*current.subgraphs, *current.runs):
        if compiled.session is failed.session or compiled.session is session:
            profiler = None if compiled.profiler is None else SessionProfile(made)
            fresh[compiled] = dataclasses.replace(compiled, session=made, profiler=profiler)
    log.warning(
        "%s failed a run (%s); its session is made again, so that the next inference does not meet the "
        "state the failed one left (known EP defect %s, docs/limits.md)",
        failed.where,
        ep_cause(cause),
        FAILED_SHAPE_KEPT.id,
    )
    return current.renewed(fresh)


def profiled_again(current: Revision) -> Revision | None:
    """The revision after ``current`` in which every profiled session whose trace was ended (its counters
    were read, and ONNX Runtime cannot start a session's profiling again) is made again with a trace of
    its own, so that later inferences have counters too; None where none was ended, or hetero-cli has no
    record of how one was made. Raises ORT_ERRORS where a device will not make one now."""
    made: dict[int, SessionProfile] = {}
    fresh = {}
    for compiled in (*current.subgraphs, *current.runs):
        profiler = compiled.profiler
        if profiler is None or not profiler.ended or compiled in fresh:
            continue
        if id(profiler.session) not in made:
            session = fresh_session(profiler.session)
            if session is None:  # a session hetero-cli did not create (a test's)
                return None
            made[id(profiler.session)] = SessionProfile(session)
        again = made[id(profiler.session)]
        fresh[compiled] = dataclasses.replace(compiled, session=again.session, profiler=again)
    return current.renewed(fresh) if fresh else None
