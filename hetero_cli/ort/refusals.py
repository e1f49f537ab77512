"""ONNX Runtime's run-time refusal of an input's shape, read from its error text: which inputs a session
refused, and which of their dimensions (the runtime then compiles the session again with them dynamic)."""

from __future__ import annotations

import re
from collections.abc import Iterable

# one refused dimension in ORT's "Got invalid dimensions for input: x for the following indices" list
_REFUSED_DIMS = re.compile(r"index: (\d+) Got: \d+ Expected: \d+")


def refused_shapes(exc: BaseException, names: Iterable[str]) -> dict[str, tuple[int, ...] | None]:
    """{input: the dimensions ORT refused (None: its rank)} for those of ``names`` whose shape the session
    that raised ``exc`` refused at run time; empty when ``exc`` is any other failure."""
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
