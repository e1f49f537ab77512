"""Branches: one inference's subgraphs run side by side, each as soon as the subgraphs it reads from are
done, on the inference's own thread and the process's branch workers, shared by every request (ONNX
Runtime releases Python's GIL while a session runs, so the branches really run at once).

Each thread is pinned to a core of its own where the platform allows it (the caller's only while it runs
a step): two unpinned threads were often put on one core by the scheduler, and lost to running the
branches one after another (issue 45). It is pinned again before each step: OpenVINO's CPU plugin leaves
the thread that ran it free to run on every core (two branches timed 3.7 ms so, 2.3 ms pinned again,
1.9 ms the slower alone).
The steps run exactly as the walk runs them (Walk.run_step), on the same inputs: the results are
bit-identical to running them in order. Tensors are released only once the inference is done (a step's
last reader in execution order may finish before an earlier one starts). A failing step lets the others
in flight finish, starts nothing more, and its StepFailure is raised: nothing is left running.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .buffers import Buffers, LinkPlan
from .profiling import Window
from .steps import Step
from .walk import Walk

log = logging.getLogger("hetero_cli")


class Branches:
    """A request's way of running ``width`` steps at once: the caller's thread runs one ready step itself,
    the process's branch workers (_WORKERS, shared by every request) the others, each thread pinned to a
    core of its own where there are enough. Steps are handed over through C queues, not futures: a
    hand-over costs a thread's wake-up, and the caller running one step saves one of them each way."""

    def __init__(self, width: int) -> None:
        self.width = width
        cores = _cores()
        self._core = cores[0] if cores and len(cores) >= width else None  # the caller's, while it runs a step

    def run(
        self,
        walk: Walk,
        steps: Sequence[Step],
        links: LinkPlan,
        values: dict[str, Any],
        buffers: Buffers,
        windows: list[Window],
    ) -> None:
        """Run ``steps`` on ``values`` (updated with their outputs), each once every step it reads from
        (``links``' step graph) is done, as many at once as are ready. Raises the first StepFailure once no
        step runs any more."""
        inbox = _WORKERS.inbox(self.width - 1)
        after = {s.position: set(links.steps[s.position].feeds_from) for s in steps}
        waiting = list(steps)
        done: set[int] = set()
        finished: queue.SimpleQueue[tuple[Step, BaseException | None]] = queue.SimpleQueue()
        running = 0
        failure: BaseException | None = None
        while waiting or running:
            ready = [s for s in waiting if after[s.position] <= done] if failure is None else []
            for step in ready:
                waiting.remove(step)
            for step in ready[:-1]:
                inbox.put((walk.run_step, step, values, buffers, windows, finished))
            running += len(ready[:-1])
            if ready:  # the caller runs the last one itself, on a core of its own for the while
                exc = _run(self._core, walk.run_step, ready[-1], values, buffers, windows, caller=True)
                finished.put((ready[-1], exc))
                running += 1
            if not running:
                break
            step, exc = finished.get()
            running -= 1
            while True:  # take every step that finished meanwhile before starting the next ones
                if exc is not None:
                    failure = failure or exc
                else:
                    done.add(step.position)
                try:
                    step, exc = finished.get_nowait()
                except queue.Empty:
                    break
                running -= 1
        if failure is not None:
            raise failure


class _Workers:
    """The process's branch worker threads, shared by every request: as many as the widest schedule run
    so far needs (its width less the caller), each pinned to a core of its own after the caller's where
    there are enough, taking steps from one inbox; made when first needed and never stopped, so that no
    request makes or ends a thread, and a thread that ran a session never exits while the process runs."""

    def __init__(self) -> None:
        self._inbox: queue.SimpleQueue[_Task] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def inbox(self, count: int) -> queue.SimpleQueue[_Task]:
        """Where steps go for the workers, at least ``count`` of them running."""
        if len(self._threads) < count:
            with self._lock:
                cores = _cores()
                while len(self._threads) < count:
                    k = len(self._threads) + 1
                    core = cores[k] if k < len(cores) else None
                    thread = threading.Thread(
                        target=_serve, args=(self._inbox, core), name=f"hetero-branch-{k}", daemon=True
                    )
                    thread.start()
                    self._threads.append(thread)
        return self._inbox


_WORKERS = _Workers()


#: a step handed to a worker: Walk.run_step, its step and arguments, and where to say it finished
_Task = tuple[Callable[..., None], Step, dict[str, Any], Buffers, list[Window], "queue.SimpleQueue[Any]"]


def _serve(inbox: queue.SimpleQueue[_Task], core: int | None) -> None:
    """A worker thread: run the steps ``inbox`` hands over, each pinned to ``core``, for good."""
    while True:
        run, step, values, buffers, windows, finished = inbox.get()
        finished.put((step, _run(core, run, step, values, buffers, windows)))


def _run(
    core: int | None,
    run: Callable[..., None],
    step: Step,
    values: dict[str, Any],
    buffers: Buffers,
    windows: list[Window],
    *,
    caller: bool = False,
) -> BaseException | None:
    """``run(step, ...)`` (Walk.run_step, keeping the tensors it read) pinned to ``core``: the exception
    it raised, or None. The caller's thread gets its own affinity back afterwards."""
    kept = _pin(core, caller)
    try:
        run(step, values, buffers, windows, release=False)
    except BaseException as exc:  # handed to the inference's thread, which raises it (StepFailure)
        return exc
    finally:
        if kept is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, kept)
    return None


def _pin(core: int | None, caller: bool) -> set[int] | None:
    """Pin this thread to ``core`` (a worker: again before each step, OpenVINO's CPU plugin frees it);
    the caller's affinity before, to give back, where it was the caller's thread."""
    if core is None:
        return None
    try:
        kept = os.sched_getaffinity(0) if caller else None
        os.sched_setaffinity(0, {core})
    except OSError:  # a core taken away meanwhile: the step runs unpinned
        return None
    return kept


def _cores() -> list[int]:
    """The cores this process may run on, in order (none where the platform cannot pin threads)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity / sched_setaffinity on this platform
        return []
