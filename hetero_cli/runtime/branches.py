"""Branches: one inference's subgraphs run side by side, each as soon as the subgraphs it reads from are
done, on worker threads of the request's own (ONNX Runtime releases Python's GIL while a session runs,
so the branches really run at once).

Each worker thread is pinned to a core of its own where the platform allows it: two unpinned threads were
often put on one core by the scheduler, and lost to running the branches one after another (issue 45).
It is pinned again before each step: OpenVINO's CPU plugin leaves the thread that ran it free to run on
every core (two branches timed 3.7 ms so, 2.3 ms pinned again, 1.9 ms the slower alone).
The steps run exactly as the walk runs them (Walk.run_step), on the same inputs: the results are
bit-identical to running them in order. Tensors are released only once the inference is done (a step's
last reader in execution order may finish before an earlier one starts). A failing step lets the others
in flight finish, starts nothing more, and its StepFailure is raised: nothing is left running.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .buffers import Buffers, LinkPlan
from .profiling import Window
from .steps import Step
from .walk import Walk

log = logging.getLogger("hetero_cli")


class Branches:
    """A request's worker threads for concurrent inference: ``width`` of them (the most steps that run at
    once), each pinned to a core of its own where there are enough; made when first needed."""

    def __init__(self, width: int) -> None:
        self.width = width
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        cores = _cores()
        self._cores = itertools.cycle(cores) if len(cores) >= width else None
        self._local = threading.local()  # each worker thread's core

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
        pool = self._workers()
        after = {s.position: set(links.steps[s.position].feeds_from) for s in steps}
        waiting = list(steps)
        done: set[int] = set()
        running: dict[concurrent.futures.Future[None], Step] = {}
        failure: BaseException | None = None
        while waiting or running:
            if failure is None:
                ready = [s for s in waiting if after[s.position] <= done]
                for step in ready:
                    waiting.remove(step)
                    future = pool.submit(self._on_core, walk.run_step, step, values, buffers, windows)
                    running[future] = step
            if not running:
                break
            finished, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in finished:
                step = running.pop(future)
                exc = future.exception()
                if exc is not None:
                    failure = failure or exc
                else:
                    done.add(step.position)
        if failure is not None:
            raise failure

    def close(self) -> None:
        """Stop the worker threads (once their steps are done)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)

    def _workers(self) -> concurrent.futures.ThreadPoolExecutor:
        pool = self._pool
        if pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = concurrent.futures.ThreadPoolExecutor(
                        self.width, thread_name_prefix="hetero-branch", initializer=self._pin
                    )
                pool = self._pool
        return pool

    def _pin(self) -> None:
        """Choose this worker thread's core: the next one (where there are as many cores as workers)."""
        if self._cores is None:
            return
        with self._lock:
            self._local.core = next(self._cores)

    def _on_core(self, run: Callable[..., None], step: Step, *args: Any) -> None:
        """``run(step, *args)`` (Walk.run_step, keeping the tensors it read) on this worker's core."""
        core = getattr(self._local, "core", None)
        if core is not None:
            with contextlib.suppress(OSError):  # a core taken away meanwhile: the thread runs unpinned
                os.sched_setaffinity(0, {core})
        run(step, *args, release=False)


def _cores() -> list[int]:
    """The cores this process may run on, in order (none where the platform cannot pin threads)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity / sched_setaffinity on this platform
        return []
