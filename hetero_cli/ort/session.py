"""The one place that imports onnxruntime, so a missing flavour gives one actionable message; and the one
place sessions are created (create_session), which observe_sessions lets tests and tools watch."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ModelError

try:
    import onnxruntime as ort
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        "hetero-cli needs ONNX Runtime, which comes in three mutually exclusive flavours: install exactly one "
        "of the extras hetero-cli[openvino] (OpenVINO + CPU execution providers), hetero-cli[cpu] (CPU only) "
        "or hetero-cli[gpu] (CUDA + TensorRT + CPU), e.g. pip install 'hetero-cli[openvino]'"
    ) from exc

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
    ``session``: the session once created (None before, or where ORT refused it).
    """

    model: str | bytes
    options: ort.SessionOptions
    providers: tuple[Any, ...]
    purpose: str
    subject: str = ""
    session: ort.InferenceSession | None = None

    @property
    def optimized(self) -> bool:
        """Whether ORT's graph optimizations are on for this session (probes may turn them off)."""
        return self.options.graph_optimization_level != ort.GraphOptimizationLevel.ORT_DISABLE_ALL


SessionObserver = Callable[[SessionRequest], object]
_observers: list[SessionObserver] = []
_observers_lock = threading.Lock()


def create_session(
    model: str | bytes,
    options: ort.SessionOptions,
    providers: Sequence[Any],
    *,
    purpose: str,
    subject: str = "",
    enable_fallback: bool = False,
) -> ort.InferenceSession:
    """An ORT InferenceSession of ``model`` (a file's path or a serialized model): every session
    hetero-cli creates is made here, so that observe_sessions sees them all.

    ``enable_fallback``: let ORT retry on the CPU EP alone after a failure (it prints to stdout when it
    does); off, the EP's failure is raised. Raises what ORT (or an observer) raises.
    """
    request = SessionRequest(model, options, tuple(providers), purpose, subject)
    with _observers_lock:
        observers = tuple(_observers)
    for observer in observers:
        observer(request)
    fallback = {} if enable_fallback else {"enable_fallback": 0}
    request.session = ort.InferenceSession(model, options, providers=list(providers), **fallback)
    return request.session


@contextlib.contextmanager
def observe_sessions(callback: SessionObserver) -> Iterator[None]:
    """Within the block, ``callback(request)`` is called with a SessionRequest before each session is
    created, on the thread that creates it (any thread: a compile creates sessions on a pool); the
    request's ``session`` is set once ORT created it. An exception the callback raises is raised instead
    of creating the session, as ORT's own error would be (how a test makes a device refuse a model).

    The public way for tests and tools to see, count or fail the sessions hetero-cli creates.
    """
    with _observers_lock:
        _observers.append(callback)
    try:
        yield
    finally:
        with _observers_lock:
            _observers.remove(callback)


# "path/file.cc:181 onnxruntime::Model::Model(onnx::ModelProto&&, ...) " in ORT's messages: where in C++ the
# error was raised, which tells a user nothing; the cause follows it.
_SOURCE = re.compile(r"(?:Exception from )?(?<![\w./-])[\w./-]*\.(?:cc|cpp|h|hpp):\d+:? ")
# errors that say the model breaks ONNX's rules or is newer than this ORT, not that an EP refused it
_MODEL_FAULT = re.compile(
    r"INVALID_GRAPH|This is an invalid model|Unsupported model IR version|ValidateOpsetForDomain|"
    r"is under development|is till opset"
)


def failure_reason(exc: BaseException, limit: int = 400) -> str:
    """ORT's error in one line of at most ``limit`` characters: every line of it, with the C++ source
    locations and function signatures (the OpenVINO EP's and ORT's own) cut out."""
    text = " ".join(str(exc)[:4096].split())  # the cause comes early; a huge message costs no time
    if not text:
        return type(exc).__name__
    parts = []
    rest = text
    while (found := _SOURCE.search(rest)) is not None:
        parts.append(rest[: found.start()])
        rest = _after_signature(rest[found.end() :])
    parts.append(rest)
    reason = " ".join(" ".join(parts).split())
    return reason if len(reason) <= limit else reason[: limit - 4].rstrip() + " ..."


def _after_signature(text: str) -> str:
    """``text`` after the C++ signature that leads it ("void ns::f(args) const"), if one does."""
    opening = text.find("(")
    head = text[:opening]
    # "[return type] ns::Class::function(": no quotes (OpenVINO's "While validating node 'opset1::...'" is
    # text), a few words at most
    if opening < 0 or "::" not in head or "'" in head or head.count(" ") > 3:
        return text
    tail = _balanced(text, opening, "()")
    if tail.startswith("::"):  # a lambda inside the function: "...::<lambda()> cause"
        tail = tail.partition(" ")[2]
        return " " + tail if tail else tail
    if tail.startswith(" const"):
        tail = tail[len(" const") :]
    if tail.startswith(" [with "):  # a template's arguments
        tail = _balanced(tail, 1, "[]")
    return tail


def _balanced(text: str, start: int, pair: str) -> str:
    """``text`` after the bracket opened at ``start`` closes (all of it if it never does)."""
    depth = 0
    for i in range(start, len(text)):
        depth += {pair[0]: 1, pair[1]: -1}.get(text[i], 0)
        if depth == 0:
            return text[i + 1 :]
    return text


def model_fault(exc: BaseException) -> bool:
    """Whether ORT refused a session because of the model itself (invalid graph, IR version or opset
    this ORT does not load), whatever the EP."""
    return _MODEL_FAULT.search(str(exc)) is not None


def refused_model(subject: str, exc: BaseException) -> ModelError | None:
    """A ModelError blaming the model where ORT refused ``subject`` for the model itself (model_fault),
    else None: moving nodes to another device would not help."""
    if not model_fault(exc):
        return None
    return ModelError(
        f"ONNX Runtime refuses {subject}: {failure_reason(exc)}; the model itself is at fault: check it with "
        "onnx.checker.check_model and fix or re-export it"
    )


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
    except Exception as exc:
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
    "SessionObserver",
    "SessionRequest",
    "assignment",
    "create_session",
    "failure_reason",
    "model_fault",
    "observe_sessions",
    "ort",
    "record_assignment",
    "refused_model",
    "session_options",
    "unloadable",
]
