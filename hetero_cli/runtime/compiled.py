"""Compiled: what a compile makes, as one value its requests run. Everything in it is decided before it
exists (the model and plan as compiled, the sessions, the config, the constant outputs, the
HETERO_FALLBACK policy, where it came from, where profiled sessions write their traces); the one thing
that changes is which Revision runs now, replaced whole (``advance``), never edited under a request.

Beside it, what runs have shown (``proven``: the sessions that completed an inference, which
HETERO_FALLBACK never moves at run time; ``unrenewed``: sessions an EP left in a failed run's state that
could not be made again) is knowledge gathered as requests run, kept here because every request of the
compiled model shares it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from types import MappingProxyType

import numpy as np

from ..graph import Model
from ..placement import visualize
from ..placement.config import SplitConfig
from ..placement.partition import Plan
from ..placement.schedule import Schedule
from ..quirks import in_force
from ..quirks.openvino import ONE_THREAD_EMPTY_OUTPUTS
from .compiled_subgraph import CompiledSubgraph
from .constants import constant_outputs
from .fallback import Fallback
from .revision import Move, Revision


# one compiled model is one object: hashed by identity (weakref.finalize), shown as object shows one
@dataclass(frozen=True, eq=False, repr=False)
class Compiled:
    """A compiled model's state: ``revision`` (the first: what runs now, until a later one replaces it),
    ``config`` (the compile's configuration: HETERO's keys and each device's), ``device_name`` (the device
    string compiled for: "HETERO:OPENVINO,CPU", "CPU"), ``constants`` ({model output: its value} of the
    outputs that are constants, computed once at compile time), ``fallback`` (the HETERO_FALLBACK policy:
    whether it is on, whether affinities were set by hand, the priority list; the moves it made are the
    current revision's, ``moves``), ``loaded_from_cache`` (whether it was made from an export: CACHE_DIR's
    or Core.import_model's) and ``profile_dir`` (where profiled sessions write their traces, or None
    without profiling). Read-only (assigning a field raises FrozenInstanceError): a compile makes a new
    one."""

    _revision: Revision
    config: SplitConfig
    device_name: str
    _: KW_ONLY
    constants: Mapping[str, np.ndarray]
    fallback: Fallback
    loaded_from_cache: bool = False
    profile_dir: Path | None = None
    # one revision built at a time; inference never takes it
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _proven: set[CompiledSubgraph] = field(default_factory=set, init=False)
    _unrenewed: dict[str, str] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "constants", MappingProxyType(dict(self.constants)))

    # --- the revision that runs now -----------------------------------------------------------------

    def current(self) -> Revision:
        """The revision that runs now (what a new inference takes, and what an export writes)."""
        return self._revision

    def advance(self, failed: CompiledSubgraph, build: Callable[[Revision], Revision | None]) -> bool:
        """Swap in ``build(current revision)`` where the current revision still holds ``failed`` (else
        another request swapped in the next one already: True at once); True where a revision was
        swapped in, False where ``build`` gives None (nothing changes). Builds run one at a time, off to
        the side: inference never waits for one, and a request keeps the revision it started with."""
        with self._lock:
            current = self._revision
            if not current.holds(failed):
                return True
            following = build(current)
            if following is None:
                return False
            object.__setattr__(self, "_revision", following)  # the one field that changes
            return True

    @property
    def checks_symbols(self) -> bool:
        """Whether a request checks that its inputs give each named dimension one size before any session
        runs: where the current revision runs the OpenVINO EP on one thread, which answers such inputs with
        empty outputs instead of failing (quirk openvino-one-thread-empty-outputs)."""
        if not in_force(ONE_THREAD_EMPTY_OUTPUTS):
            return False
        schedule = self._revision.schedule
        for c in self._revision.subgraphs:
            if c.target.ep == ONE_THREAD_EMPTY_OUTPUTS.ep:
                settings = (
                    self.config.settings(c.target)
                    if schedule is None
                    else schedule.settings(self.config, c.target)
                )
                if settings.provider_options.get("num_of_threads") == "1":
                    return True
        return False

    # --- what runs have shown -----------------------------------------------------------------------

    def proven(self, compiled: CompiledSubgraph) -> bool:
        """Whether ``compiled`` completed an inference: HETERO_FALLBACK never moves it at run time then (a
        later failure is the input's), and its outputs' shapes have been checked."""
        return compiled in self._proven

    def prove(self, runs: Iterable[CompiledSubgraph]) -> None:
        """Record that ``runs`` completed an inference (``proven`` from now on)."""
        self._proven.update(runs)

    @property
    def unrenewed(self) -> Mapping[str, str]:
        """{run: why} for sessions an EP left in a failed run's state that could not be made again (a
        server is not ready while there are any), read-only."""
        return MappingProxyType(self._unrenewed)

    def note_unrenewed(self, where: str, reason: str | None) -> None:
        """Record that the session of run ``where`` could not be made again after a failed run, and why
        (``reason`` None: it was made again, or no longer needs to be)."""
        with self._lock:
            if reason is None:
                self._unrenewed.pop(where, None)
            else:
                self._unrenewed[where] = reason


def first_compiled(
    model: Model,
    plan: Plan,
    subgraphs: Sequence[CompiledSubgraph],
    config: SplitConfig,
    device_name: str,
    *,
    fallback: Fallback,
    runs: Sequence[CompiledSubgraph] | None = None,
    moves: Sequence[Move] = (),
    schedule: Schedule | None = None,
    draw: bool = False,
    dot_dir: str | None = None,
    loaded_from_cache: bool = False,
    profile_dir: Path | None = None,
) -> Compiled:
    """A compile's Compiled, at revision 0: ``subgraphs`` for ``plan`` compiled from ``model``, ``runs`` what
    an inference runs of them (None: the subgraphs themselves), the compile's HETERO_FALLBACK ``moves`` and
    its ``schedule`` (None: one after another); ``config``, ``device_name``, ``fallback``,
    ``loaded_from_cache`` and ``profile_dir`` as Compiled holds them. The constant outputs are computed
    first (CompileError where they cannot be), then, where ``draw``, the .dot files of ``plan`` are drawn
    into ``dot_dir`` (None: the current directory; HeteroError where they cannot be written)."""
    constants = constant_outputs(model, plan)  # may fail: before any .dot file is drawn
    together = schedule.side_by_side if schedule is not None else ()
    dots = visualize.dump(model, plan, dot_dir, together) if draw else ()
    revision = Revision(
        0,
        model,
        plan,
        tuple(subgraphs),
        tuple(subgraphs) if runs is None else tuple(runs),
        tuple(moves),
        dot_files=tuple(dots),
        schedule=schedule,
    )
    return Compiled(
        revision,
        config,
        device_name,
        constants=constants,
        fallback=fallback,
        loaded_from_cache=loaded_from_cache,
        profile_dir=profile_dir,
    )
