"""The thread pool a compile creates subgraph sessions on, while the calling thread exports the next
subgraphs (a session's creation is C++ work; exporting a subgraph is Python)."""

from __future__ import annotations

import concurrent.futures
import os
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from ..ort.session import WAIT_SLICE_S, native_work

T = TypeVar("T")


def compile_workers(subgraphs: int) -> int:
    """Threads that create subgraph sessions at once: one per core, at most 8, at most one per subgraph.

    in_parallel looks it up at each call: tests replace it (monkeypatch) to get a pool of a known width
    whatever the machine's cores.
    """
    return max(1, min(subgraphs, os.cpu_count() or 1, 8))


def in_parallel(jobs: Sequence[Callable[[], Callable[[], T]]]) -> list[T]:
    """Run each job's first stage here, in order, and its second on a pool or here; results in job order.

    This thread finishes a job itself whenever the pool's ``compile_workers - 1`` threads are all busy,
    so ``compile_workers`` sessions are created at once with one thread fewer: each new thread gets a
    malloc arena of its own, and an OpenVINO session made there kept about 4 MiB more resident than one
    made here. At most ``compile_workers`` first-stage results (exported models) exist at once, so a split
    never holds every subgraph's serialized copy. After a failure nothing new starts; the error raised is
    that of the first failing job in order, whatever finished first, but a KeyboardInterrupt, which goes
    up at once (the sessions being created finish alone; this thread waits for them in short slices).
    """
    width = compile_workers(len(jobs))
    if width == 1:
        return [job()() for job in jobs]
    with native_work():  # the pool's sessions: Ctrl-C ends a command line at once (ort.session)
        return _on_a_pool(jobs, width)


def _on_a_pool(jobs: Sequence[Callable[[], Callable[[], T]]], width: int) -> list[T]:
    """in_parallel's work with ``width`` threads: ``width - 1`` on a pool and the calling one."""
    slots = threading.BoundedSemaphore(width - 1)
    futures: list[concurrent.futures.Future[T]] = []
    failed = threading.Event()

    def release(future: concurrent.futures.Future[T]) -> None:
        if future.cancelled() or future.exception() is not None:
            failed.set()
        slots.release()

    pool = concurrent.futures.ThreadPoolExecutor(width - 1, thread_name_prefix="hetero-compile")
    try:
        for job in jobs:
            if failed.is_set():
                break
            try:
                finish = job()
            except Exception as exc:  # raised below, once the sessions already being made have settled
                futures.append(_settled(exc))
                break
            if slots.acquire(blocking=False):
                future = pool.submit(finish)
                future.add_done_callback(release)
                futures.append(future)
                continue
            try:
                futures.append(_settled(finish()))
            except Exception as exc:  # raised below, as the other jobs' failures are
                futures.append(_settled(exc))
                break
        for future in futures:
            exc = _outcome(future)
            if exc is not None:
                raise exc
    except BaseException as exc:
        # Ctrl-C (KeyboardInterrupt) goes up at once: sessions being created are left to finish alone
        pool.shutdown(wait=not isinstance(exc, KeyboardInterrupt), cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return [future.result() for future in futures]


def _outcome(future: concurrent.futures.Future[T]) -> BaseException | None:
    """The future's exception once it is done (None for a result), waited for in short slices: the
    calling thread keeps taking a signal (Ctrl-C) while a pool thread is inside a native compile."""
    while True:
        try:
            return future.exception(timeout=WAIT_SLICE_S)
        except concurrent.futures.TimeoutError:
            continue


def _settled(outcome: T | BaseException) -> concurrent.futures.Future[T]:
    """A finished future holding ``outcome`` (a result, or the exception to raise)."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
    return future
