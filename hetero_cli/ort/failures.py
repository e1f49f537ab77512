"""The one place that reads ONNX Runtime's error text: what an exception from ORT says, in the terms hetero-cli
acts on (the reason in one line, whether the model is at fault, the node without a kernel, the input
dimensions a run refused). ORT's messages are no API: when one changes, only this module needs another look.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ..errors import ModelError

__all__ = [
    "about_shapes",
    "cited",
    "ep_cause",
    "failure_reason",
    "model_fault",
    "refused_inputs",
    "refused_model",
    "unimplemented_node",
]

# "path/file.cc:181 onnxruntime::Model::Model(onnx::ModelProto&&, ...) " in ORT's messages: where in C++ the
# error was raised, which tells a user nothing; the cause follows it.
_SOURCE = re.compile(r"(?:Exception from )?(?<![\w./-])[\w./-]*\.(?:cc|cpp|h|hpp):\d+:? ")
# errors that say the model breaks ONNX's rules or is newer than this ORT, not that an EP refused it
_MODEL_FAULT = re.compile(
    r"INVALID_GRAPH|This is an invalid model|Unsupported model IR version|ValidateOpsetForDomain|"
    r"is under development|is till opset"
)
# ORT's and the OpenVINO EP's framing around an EP's own words: which session, node and C++ check failed
_FRAMING = re.compile(
    r"\[ONNXRuntimeError\] : \d+ : \w+ : |Non-zero status code returned while running \S+ node\. "
    r"Name:'[^']*' Status Message: |Exception during initialization: |\[OpenVINO-EP\] Exception while "
    r"Loading Network for graph \S+: |Check '[^']*' failed at "
)
# a probe session ORT refused because one node has no kernel on any of its EPs
_NO_KERNEL = re.compile(r"Could not find an implementation for .*? node with name '([^']*)'")
# one refused dimension in "Got invalid dimensions for input: x for the following indices index: 0 Got: 4
# Expected: 2 ..."
_REFUSED_DIMS = re.compile(r"index: (\d+) Got: \d+ Expected: \d+")


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


def unimplemented_node(exc: BaseException) -> str | None:
    """The name of the node ORT found no kernel for where that is why it refused a session, else None:
    a probe retries without that node."""
    found = _NO_KERNEL.search(str(exc))
    return found.group(1) if found else None


def refused_inputs(exc: BaseException, names: Iterable[str]) -> dict[str, tuple[int, ...] | None]:
    """{input: the dimensions ORT refused (None: its rank)} for those of ``names`` whose shape a run
    refused ("Got invalid dimensions for input: ...", "Invalid rank for input: ..."); empty for any other
    failure. Why: a declared shape the producing subgraph did not make is relaxed, not an error."""
    text = str(exc)
    if "for input: " not in text:
        return {}
    refused: dict[str, tuple[int, ...] | None] = {}
    for name in names:
        head = f"Got invalid dimensions for input: {name} for the following indices"
        if head in text:
            listed = text.split(head, 1)[1].split("Please fix", 1)[0]
            refused[name] = tuple(int(i) for i in _REFUSED_DIMS.findall(listed))
        elif f"Invalid rank for input: {name} Got: " in text:
            refused[name] = None
    return refused


def about_shapes(exc: BaseException) -> bool:
    """Whether an error (ORT's, or hetero-cli's quoting it) is about shapes: a shape, rank or dimension."""
    text = str(exc).lower()
    return any(word in text for word in ("shape", "rank", "dimension"))


def cited(exc: BaseException | str, signatures: Mapping[str, str]) -> str | None:
    """The key of the first of ``signatures`` ({quirk id: words its EP's error carries}) whose words
    ``exc`` (an error, or its reason as failure_reason gave it) holds, else None: a fallback's warning
    names the known defect behind it."""
    text = " ".join(str(exc).split())
    return next((key for key, words in signatures.items() if words and words in text), None)


def ep_cause(exc: BaseException | str, limit: int = 200) -> str:
    """What the EP itself said, in one line of at most ``limit`` characters: failure_reason's line (or
    ``exc`` given as that line) without ORT's framing (status code, session and node names, the C++ check
    that failed), for a warning where the whole reason would bury it."""
    text = failure_reason(exc) if isinstance(exc, BaseException) else " ".join(exc.split())
    cause = " ".join(_FRAMING.sub("", text).split()) or text
    return cause if len(cause) <= limit else cause[: limit - 4].rstrip() + " ..."
