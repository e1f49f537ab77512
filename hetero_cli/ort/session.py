"""The one place that imports onnxruntime, so a missing flavour gives one actionable message; and the one
place sessions are created (create_session), which observe_sessions lets tests and tools watch."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import NoOnnxRuntimeError
from .failures import failure_reason

try:
    import onnxruntime as ort
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise NoOnnxRuntimeError(
        "hetero-cli needs ONNX Runtime, which comes in three mutually exclusive flavours: install exactly one "
        "of the extras hetero-cli[openvino] (OpenVINO + CPU execution providers), hetero-cli[cpu] (CPU only) "
        "or hetero-cli[gpu] (CUDA + TensorRT + CPU): `make FLAVOUR=openvino install` in hetero-cli's source "
        "tree, i.e. pip install -e '.[openvino]' there"
    ) from exc

#: what ONNX Runtime raises for a model, session or run it refuses: its own error classes (Fail,
#: InvalidArgument, EPFail... from its pybind module) and RuntimeError, which pybind11 makes of a C++
#: exception an EP throws. hetero-cli's errors are never among them, so an ``except ORT_ERRORS`` that goes
#: on never takes hetero-cli's own failure (or bug) for an execution provider's.
ORT_ERRORS: tuple[type[Exception], ...] = (
    *(
        kind
        for kind in vars(ort.capi.onnxruntime_pybind11_state).values()
        if isinstance(kind, type) and issubclass(kind, Exception)
    ),
    RuntimeError,
)
#: what a run raises where ONNX Runtime refuses it: ORT_ERRORS, and the ValueError and TypeError its
#: Python layer raises for feeds it cannot take (InferenceSession.run's checks). Caught only around ORT's
#: own calls, where no hetero-cli code runs.
ORT_RUN_ERRORS: tuple[type[Exception], ...] = (*ORT_ERRORS, ValueError, TypeError)

# ORT's own log lines ("Removing initializer ...", errors it also raises as exceptions) are noise a user
# cannot act on; 4 = fatal only. Failures still reach hetero-cli as exceptions with ORT's message.
QUIET = 4

# Sessions are created from serialized bytes, which have no folder: ORT finds the external data files of
# a model (weights kept beside the .onnx file) in the folder this session config entry names.
EXTERNAL_DATA_FOLDER = "session.model_external_initializers_file_folder_path"


def session_options(
    *, optimize: bool = True, external_dir: str | os.PathLike[str] | None = None
) -> ort.SessionOptions:
    """Fresh SessionOptions with ORT's own log noise turned down.

    ``external_dir``: where ORT reads the model's external data files (the folder of the model file;
    None for a model without any).
    """
    so = ort.SessionOptions()
    so.log_severity_level = QUIET
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    folder = os.fspath(external_dir) if external_dir is not None else ""
    if folder:
        so.add_session_config_entry(EXTERNAL_DATA_FOLDER, folder)
    return so


# --- the one way hetero-cli creates a session ---------------------------------------------------------------

# What a session is for (SessionRequest.purpose)
PROBE = "probe"  # the query's: which nodes a device's EP claims
SUBGRAPH = "subgraph"  # the compile's: a subgraph (or the whole model) on its device
CONSTANTS = "constants"  # the compile's: the model's constant outputs, computed once
TYPING = "typing"  # ORT's inference of the types of some tensors
CHECK = "check"  # made only to see whether ORT creates it at all (an EP's availability, a loadable model)


@dataclass(eq=False)
class SessionRequest:
    """One session hetero-cli asks ONNX Runtime for, as observe_sessions' callbacks see it.

    ``model``: the path of a model file or a serialized model; ``options`` and ``providers`` as handed to
    ``onnxruntime.InferenceSession``; ``purpose``: one of PROBE, SUBGRAPH, CONSTANTS, TYPING, CHECK;
    ``subject``: what it is made of or for (a device name for a probe, ``subgraph<N>`` for a subgraph);
    ``device``: the device it is for, where one is ("" otherwise); ``session``: the session once created
    (None before, or where ORT refused it).
    """

    model: str | bytes
    options: ort.SessionOptions
    providers: tuple[Any, ...]
    purpose: str
    subject: str = ""
    device: str = ""
    session: ort.InferenceSession | None = None


SessionObserver = Callable[[SessionRequest], object]
_observers: list[tuple[SessionObserver, SessionObserver | None]] = []
_observers_lock = threading.Lock()


def create_session(
    model: str | bytes,
    options: ort.SessionOptions,
    providers: Sequence[Any],
    *,
    purpose: str,
    subject: str = "",
    device: str = "",
    enable_fallback: bool = False,
) -> ort.InferenceSession:
    """An ORT InferenceSession of ``model`` (a file's path or a serialized model): every session
    hetero-cli creates is made here, so that observe_sessions sees them all, in_creation lists those
    being made, and the main thread keeps taking Ctrl-C while ORT compiles (on_its_own_thread).

    ``device``: the device the session is for ("" for none); ``enable_fallback``: let ORT retry on the CPU
    EP alone after a failure (it prints to stdout when it does); off, the EP's failure is raised. Raises
    what ORT (or an observer) raises, and KeyboardInterrupt where the main thread is interrupted while it
    waits (the session is then left to finish on its own and dropped).
    """
    request = SessionRequest(model, options, tuple(providers), purpose, subject, device)
    fallback = {} if enable_fallback else {"enable_fallback": 0}

    def create() -> ort.InferenceSession:
        started = _Creation(request, time.monotonic())
        with _creations_lock:
            _creations.append(started)
        try:
            with _observers_lock:
                observers = tuple(_observers)
            for observer, _ in observers:
                observer(request)
            request.session = session = ort.InferenceSession(
                model, options, providers=list(providers), **fallback
            )
            with _made_lock:
                _made[session] = (replace(request, session=None), enable_fallback)
            for _, made in observers:
                if made is not None:
                    made(request)
            return request.session
        finally:
            with _creations_lock:
                _creations.remove(started)

    if threading.current_thread() is threading.main_thread():
        with native_work():
            return on_its_own_thread(create)
    return create()


# how each session create_session made was asked for, so that fresh_session can ask again: weak keys (no
# session kept alive), and the model's bytes are those the session itself holds (ORT keeps them)
_made: weakref.WeakKeyDictionary[Any, tuple[SessionRequest, bool]] = weakref.WeakKeyDictionary()
_made_lock = threading.Lock()


def fresh_session(session: ort.InferenceSession) -> ort.InferenceSession | None:
    """A new session made as ``session`` was (the same model, options and providers, through
    create_session), or None for a session create_session did not make. Raises what create_session
    raises (ORT_ERRORS where ORT cannot make it again)."""
    with _made_lock:
        made = _made.get(session)
    if made is None:
        return None
    request, fallback = made
    return create_session(
        request.model,
        request.options,
        request.providers,
        purpose=request.purpose,
        subject=request.subject,
        device=request.device,
        enable_fallback=fallback,
    )


# --- the sessions being created, and Ctrl-C while the main thread waits for one --------------------------

WAIT_SLICE_S = 0.1  # the main thread's waits, so that even a signal that wakes no system call is taken


@dataclass(frozen=True)
class _Creation:
    request: SessionRequest
    since: float  # time.monotonic() when it began


_creations: list[_Creation] = []
_creations_lock = threading.Lock()


@dataclass(frozen=True)
class Creating:
    """A session being created now: what for (``purpose``, ``subject``, ``device`` as in SessionRequest)
    and for how many ``seconds`` so far."""

    purpose: str
    subject: str
    device: str
    seconds: float

    @property
    def doing(self) -> str:
        """What it is, in words: "compiling subgraph2 on OPENVINO", "querying OPENVINO"."""
        on = f" on {self.device}" if self.device else ""
        if self.purpose == PROBE:
            return f"querying {self.device or self.subject}"
        if self.purpose == SUBGRAPH:
            return f"compiling {self.subject}{on}"
        return f"creating ONNX Runtime's session for {self.subject or self.purpose}{on}"


def in_creation() -> list[Creating]:
    """The sessions being created now, on any thread, the longest-running first; those the main thread
    stopped waiting for (Ctrl-C) included, until ORT is done with them."""
    now = time.monotonic()
    with _creations_lock:
        current = sorted(_creations, key=lambda c: c.since)
    return [Creating(c.request.purpose, c.request.subject, c.request.device, now - c.since) for c in current]


_interrupt_ends_process = False


def interrupt_ends_process(on: bool) -> None:
    """For a program that is the process (the command line), ``on``: while ONNX Runtime creates a session,
    Ctrl-C ends the process at once, as an unhandled SIGINT does (the shell's status 130). ORT releases
    such as 1.24 hold Python's GIL for a whole session's creation (minutes for a big model on the OpenVINO
    EP): no Python code runs until it returns, so a KeyboardInterrupt could not be raised until then, nor
    any clean-up run. Off (the default, for a library) signals are left as they are."""
    global _interrupt_ends_process
    _interrupt_ends_process = on


@contextlib.contextmanager
def native_work() -> Iterator[None]:
    """Around work that ONNX Runtime does in native code (creating sessions): with interrupt_ends_process
    on, on the main thread, SIGINT takes its default action (ending the process) within the block, then
    Python's handler again; otherwise nothing changes."""
    if (
        not _interrupt_ends_process
        or threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def on_its_own_thread(work: Callable[[], Any]) -> Any:
    """``work()`` on a thread of its own, waited for here in short slices: while ORT compiles (native
    code, which holds a thread until it returns) this thread still takes a signal, so Ctrl-C raises
    KeyboardInterrupt here at once. The work then goes on alone (a daemon thread) and its result is
    dropped: a native compile cannot be stopped. Returns what ``work`` returns; raises what it raises."""
    outcome: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # handed to the waiting thread, which raises it
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name="hetero-session", daemon=True).start()
    while not done.wait(WAIT_SLICE_S):
        pass
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


@contextlib.contextmanager
def observe_sessions(callback: SessionObserver, made: SessionObserver | None = None) -> Iterator[None]:
    """Within the block, ``callback(request)`` is called with a SessionRequest before each session is
    created, on the thread that creates it (any thread: a compile creates sessions on a pool, and a
    session asked for on the main thread is created on a thread of its own); the
    request's ``session`` is set once ORT created it. An exception the callback raises is raised instead
    of creating the session, as ORT's own error would be (how a test makes a device refuse a model).
    ``made(request)``, where given, is called once ORT created the session: what ``request.session`` holds
    when it returns is what hetero-cli runs (how a test makes a device fail a run).

    The public way for tests and tools to see, count or fail the sessions hetero-cli creates.
    """
    entry = (callback, made)
    with _observers_lock:
        _observers.append(entry)
    try:
        yield
    finally:
        with _observers_lock:
            _observers.remove(entry)


@functools.cache
def unloadable(ir_version: int, opset: int) -> str | None:
    """Why this ORT loads no model of this IR version and default-domain opset (None if it does): checked
    once per pair on a one-node model, so that a model ORT cannot load is refused when it is read."""
    from onnx import TensorProto, helper

    value = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "ir_and_opset_check",
        [value],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    proto = helper.make_model(graph, ir_version=ir_version, opset_imports=[helper.make_opsetid("", opset)])
    try:
        create_session(
            proto.SerializeToString(),
            session_options(),
            ["CPUExecutionProvider"],
            purpose=CHECK,
            subject="IR version and opset",
            enable_fallback=True,
        )
    except ORT_ERRORS as exc:  # ORT refuses such a model: that is the answer
        return failure_reason(exc)
    return None


def record_assignment(so: ort.SessionOptions) -> None:
    """Ask ORT to record which EP runs which node (read back with get_provider_graph_assignment_info)."""
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")


def assignment(session: ort.InferenceSession) -> list[tuple[str, list[tuple[str, str]]]]:
    """[(ep name, [(node name, op type), ...]), ...] as ORT placed the session's nodes."""
    return [
        (sg.ep_name, [(n.name, n.op_type) for n in sg.get_nodes()])
        for sg in session.get_provider_graph_assignment_info()
    ]


__all__ = [
    "CHECK",
    "CONSTANTS",
    "EXTERNAL_DATA_FOLDER",
    "PROBE",
    "QUIET",
    "SUBGRAPH",
    "TYPING",
    "Creating",
    "SessionObserver",
    "SessionRequest",
    "assignment",
    "create_session",
    "in_creation",
    "interrupt_ends_process",
    "native_work",
    "observe_sessions",
    "on_its_own_thread",
    "ort",
    "record_assignment",
    "session_options",
    "unloadable",
]
