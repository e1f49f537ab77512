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


class Compiled:
    """A compiled model's state: ``revision`` (the first: what runs now, until a later one replaces it),
    ``config``, ``device_name`` (the device string compiled for), ``constants`` (the values of model
    outputs that are constants, computed once), ``fallback`` (the HETERO_FALLBACK policy: on or off,
    manual or automatic, the priority list), ``loaded_from_cache`` (made from an export: CACHE_DIR's or
    Core.import_model's) and ``profile_dir`` (where profiled sessions write their traces, or None).
    Read-only: a compile makes a new one."""

    def __init__(
        self,
        revision: Revision,
        config: SplitConfig,
        device_name: str,
        *,
        constants: Mapping[str, np.ndarray],
        fallback: Fallback,
        loaded_from_cache: bool = False,
        profile_dir: Path | None = None,
    ) -> None:
        self._revision = revision
        self._config = config
        self._device_name = device_name
        self._constants = MappingProxyType(dict(constants))
        self._fallback = fallback
        self._loaded_from_cache = loaded_from_cache
        self._profile_dir = profile_dir
        self._lock = threading.Lock()  # one revision built at a time; inference never takes it
        self._proven: set[CompiledSubgraph] = set()
        self._unrenewed: dict[str, str] = {}

    # --- what the compile decided -------------------------------------------------------------------

    @property
    def config(self) -> SplitConfig:
        """The compile's configuration (HETERO's keys and each device's)."""
        return self._config

    @property
    def device_name(self) -> str:
        """The device string compiled for ("HETERO:OPENVINO,CPU", "CPU")."""
        return self._device_name

    @property
    def constants(self) -> Mapping[str, np.ndarray]:
        """{model output: its value} of the outputs that are constants, computed at compile time."""
        return self._constants

    @property
    def fallback(self) -> Fallback:
        """The HETERO_FALLBACK policy: whether it is on, whether affinities were set by hand, the
        priority list. The moves it made are the current revision's (``moves``)."""
        return self._fallback

    @property
    def loaded_from_cache(self) -> bool:
        """Whether it was made from an export (CACHE_DIR's, or Core.import_model's)."""
        return self._loaded_from_cache

    @property
    def profile_dir(self) -> Path | None:
        """Where profiled sessions write their traces (None without profiling)."""
        return self._profile_dir

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
            self._revision = following
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
                    self._config.settings(c.target)
                    if schedule is None
                    else schedule.settings(self._config, c.target)
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
