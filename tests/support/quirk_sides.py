"""The two sides of a quirk's repro test: the defect where the installed ONNX Runtime release is one the
record affects, the fixed behaviour where it is not (so a release that brings the defect back fails)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from hetero_cli.quirks import Quirk, in_force


def expect(record: Quirk, defect: object, fixed: object) -> object:
    """``defect`` where the installed release has ``record``'s defect, else ``fixed``: the value to expect."""
    return defect if in_force(record) else fixed


@contextlib.contextmanager
def defect_raises(record: Quirk, match: str) -> Iterator[None]:
    """pytest.raises(match=...) where the installed release has ``record``'s defect; where it is fixed, the
    block must run without an error."""
    if in_force(record):
        with pytest.raises(Exception, match=match):
            yield
    else:
        yield
