"""Faults injected through the session factory's seam (hetero_cli.ort.session.observe_sessions): a device
that refuses to compile a subgraph, or whose sessions fail their runs, on the CPU EP alone, so that
HETERO_FALLBACK and the re-placement paths are tested in every flavour, the CPU-only one included.

    with observe_sessions(*refusing_device("A")):          # every subgraph session on A: a compile failure
    with observe_sessions(*failing_runs("A", times=1)):    # A's sessions fail their next run, once in all
    with observe_sessions(*(hooks := counting_runs("A"))):  # hooks[1].runs: A's runs so far

The devices are made-up names for the CPU EP (``cpu_devices``): two real sessions each, bit-exact.
"""

from __future__ import annotations

import threading
from typing import Any

import onnxruntime as ort

from hetero_cli.ort.session import SUBGRAPH, SessionRequest
from hetero_cli.placement import devices as registry
from hetero_cli.placement.devices import Device

FAIL = ort.capi.onnxruntime_pybind11_state.Fail


def cpu_devices(*names: str) -> dict[str, Device]:
    """{name: a device of that name run by the CPU EP}, in order: a priority list of made-up devices."""
    cpu = registry.lookup("CPU")
    return {name: Device(name, cpu.kind, {}) for name in names}


def refusing_device(device: str) -> tuple[Any, None]:
    """observe_sessions' arguments for a device whose subgraph sessions ORT refuses to create."""

    def refuse(request: SessionRequest) -> None:
        if request.purpose == SUBGRAPH and request.device == device:
            raise FAIL(f"[ONNXRuntimeError] : 1 : FAIL : {device} refuses this subgraph (injected)")

    return refuse, None


class _FailingRuns:
    """A C session whose runs fail while ``left`` says so (shared by every session of the device), then run
    as the real one does; anything else is the real session's."""

    def __init__(self, real: Any, left: list[int], lock: threading.Lock, device: str) -> None:
        self._real = real
        self._left = left
        self._lock = lock
        self._device = device

    def _fail_now(self) -> bool:
        with self._lock:
            if self._left[0] > 0:
                self._left[0] -= 1
                return True
        return False

    def run_with_ort_values(self, *args: Any) -> Any:
        if self._fail_now():
            raise FAIL(f"[ONNXRuntimeError] : 1 : FAIL : {self._device} failed the run (injected)")
        return self._real.run_with_ort_values(*args)

    def run(self, *args: Any) -> Any:
        if self._fail_now():
            raise FAIL(f"[ONNXRuntimeError] : 1 : FAIL : {self._device} failed the run (injected)")
        return self._real.run(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def failing_runs(device: str, times: int) -> tuple[Any, Any]:
    """observe_sessions' arguments for a device whose subgraph sessions fail their next ``times`` runs in
    all (the runs ORT makes without pre-bound outputs: give the model dynamic shapes), then run right;
    ``arm`` on the returned made-hook sets how many more fail from now on."""
    left, lock = [times], threading.Lock()

    def made(request: SessionRequest) -> None:
        if request.purpose == SUBGRAPH and request.device == device:
            request.session._sess = _FailingRuns(request.session._sess, left, lock, device)

    def arm(count: int) -> None:
        with lock:
            left[0] = count

    made.arm = arm  # type: ignore[attr-defined]
    return (lambda request: None), made


class _MeetingRuns:
    """A C session whose runs wait at ``barrier`` first: where two sessions' runs must meet there, they
    can only pass if they run at the same time (a sequential walk waits in vain, and the barrier's
    timeout fails the run)."""

    def __init__(self, real: Any, barrier: threading.Barrier) -> None:
        self._real = real
        self._barrier = barrier

    def run_with_ort_values(self, *args: Any) -> Any:
        self._barrier.wait()
        return self._real.run_with_ort_values(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def meeting_runs(subjects: set[str], timeout_s: float = 30.0) -> tuple[Any, Any]:
    """observe_sessions' arguments under which the runs of the subgraphs named in ``subjects`` (their
    SessionRequest.subject, ``subgraph<N>``) wait for each other at one barrier: they pass only where an
    inference runs them at the same time (the runs ORT makes without pre-bound outputs: give the model
    dynamic shapes). ``broken`` on the made-hook tells whether a wait timed out."""
    barrier = threading.Barrier(len(subjects), timeout=timeout_s)

    def made(request: SessionRequest) -> None:
        if request.purpose == SUBGRAPH and request.subject in subjects:
            request.session._sess = _MeetingRuns(request.session._sess, barrier)

    made.barrier = barrier  # type: ignore[attr-defined]
    return (lambda request: None), made


class _CountingRuns:
    """A C session that adds one item to ``runs`` (shared by every session of the device) per run, then
    runs as the real one does; anything else is the real session's."""

    def __init__(self, real: Any, runs: list[str]) -> None:
        self._real = real
        self._runs = runs

    def run_with_ort_values(self, *args: Any) -> Any:
        self._runs.append("run_with_ort_values")
        return self._real.run_with_ort_values(*args)

    def run(self, *args: Any) -> Any:
        self._runs.append("run")
        return self._real.run(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def counting_runs(device: str) -> tuple[Any, Any]:
    """observe_sessions' arguments that count the runs of ``device``'s subgraph sessions (the runs ORT
    makes without pre-bound outputs: give the model dynamic shapes): ``runs`` on the made-hook, one item
    a run."""
    runs: list[str] = []

    def made(request: SessionRequest) -> None:
        if request.purpose == SUBGRAPH and request.device == device:
            request.session._sess = _CountingRuns(request.session._sess, runs)

    made.runs = runs  # type: ignore[attr-defined]
    return (lambda request: None), made
