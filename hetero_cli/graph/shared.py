"""What the graph layer's modules share: kinds of attributes and protobuf fields, copying a message's
fields, and an exception's first line for the messages the layer raises."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import onnx

# attribute types that hold subgraphs (If, Loop, Scan bodies)
GRAPH, GRAPHS = onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS
# attribute types whose value is numbers or strings: no text of a field, no tensor, no graph in it (a
# STRING attribute's value is bytes in ONNX)
SCALAR_ATTRIBUTES = frozenset(
    getattr(onnx.AttributeProto, t) for t in ("FLOAT", "INT", "STRING", "FLOATS", "INTS", "STRINGS")
)


@functools.cache
def field_kind(field: Any) -> tuple[bool, bool, bool]:
    """(is a message, is a string, is repeated) of a protobuf field descriptor; cached, since walks over a
    model's messages ask it of the same few fields again and again."""
    repeated = getattr(field, "is_repeated", None)
    if repeated is None:  # protobuf before 5.x
        repeated = field.label == field.LABEL_REPEATED
    return field.type == field.TYPE_MESSAGE, field.type == field.TYPE_STRING, bool(repeated)


def copy_fields(dst: Any, src: Any, *, skip: Iterable[str]) -> None:
    """Copy the fields set in message ``src`` into ``dst`` (of the same type), those named in ``skip``
    left out: a copy without, say, a tensor's data, made without copying that data first."""
    skipped = set(skip)
    for field, value in src.ListFields():
        if field.name in skipped:
            continue
        is_message, _, repeated = field_kind(field)
        if repeated:
            getattr(dst, field.name).extend(value)
        elif is_message:
            getattr(dst, field.name).CopyFrom(value)
        else:
            setattr(dst, field.name, value)


def short_reason(exc: BaseException) -> str:
    """The first line of ``exc``'s message (at most 200 characters), else its type's name: what a
    ModelError quotes of the error underneath."""
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
