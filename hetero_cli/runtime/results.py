"""An inference's outputs: Results, the dict that is also keyed by output port and index, as OpenVINO's
results are, and port_name, which turns such a key into a tensor name."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np


class Results(dict):
    """An inference's outputs, ``{name: array}`` in the model's output order; like OpenVINO's results, also
    keyed by output port or index: ``results["y"]``, ``results[compiled.outputs[0]]``, ``results[0]``.

    ``in`` takes the same keys (``compiled.outputs[0] in results``); otherwise a plain dict (iteration and
    ``keys()`` see the names).
    """

    __slots__ = ("_names",)

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        name = port_name(key, getattr(self, "_names", ()))
        return name is not None and dict.__contains__(self, name)

    def __missing__(self, key: Any) -> np.ndarray:
        name = port_name(key, getattr(self, "_names", ()))
        if name is None or name == key or not dict.__contains__(self, name):
            raise KeyError(key)
        return dict.__getitem__(self, name)

    def get(self, key: Any, default: Any = None) -> Any:
        """The output for ``key`` (name, port or index), or ``default``."""
        try:
            return self[key]
        except (KeyError, TypeError):
            return default

    def copy(self) -> Results:
        """A shallow copy, keyed by port and index too."""
        return make_results(dict(self), getattr(self, "_names", ()))

    def __reduce__(self) -> Any:  # pickled as the plain dict it holds, with the names for ports and indexes
        return (make_results, (dict(self), getattr(self, "_names", ())))


def make_results(values: dict[str, Any], names: tuple[str, ...]) -> Results:
    """Results holding ``values``, whose indexes count in ``names`` (the model's outputs, in order)."""
    out = Results(values)
    out._names = names
    return out


def port_name(key: Any, names: Sequence[str]) -> str | None:
    """The tensor name ``key`` stands for: a name as it is, a port (anything with ``get_any_name``, such as
    compiled.inputs[0]) by its name, an int as the index into ``names``; None for anything else."""
    if isinstance(key, str):
        return key
    if isinstance(key, numbers.Integral) and not isinstance(key, bool):
        return names[key] if -len(names) <= key < len(names) else None
    get_any_name = getattr(key, "get_any_name", None)
    if callable(get_any_name):
        name = get_any_name()
        return name if isinstance(name, str) else None
    return None
