"""Which subgraphs of a plan may run at the same time: the plan's links as a graph of steps (which subgraph
feeds which), the most of them that can run at once, and, under HETERO_CONCURRENCY, whether an inference
runs them so and how the cores are shared between the sessions that do.

    schedule = schedule_of(plan, host={"CPU", "OPENVINO"}, mode="AUTO", cores=2)
    schedule.after          # ((), (0,), (0,), (1, 2)): subgraph i reads what these subgraphs make
    schedule.width          # 2: subgraphs 2 and 3 (indexes 1 and 2) can run at once
    schedule.concurrent     # True: an inference starts every subgraph whose inputs are ready
    schedule.threads        # 1: each host session's intra-op threads, so those that run at once share 2

Plain data, decided from the plan alone (no session): ``hetero query`` prints it, the compile sizes the
sessions' thread pools by it, a request walks the steps by it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import onnx

from ..errors import ConfigError
from .devices import Device
from .partition import Plan

if TYPE_CHECKING:  # config reads HETERO_CONCURRENCY with parse_mode: it imports this module
    from .config import DeviceSettings, SplitConfig

SEQUENTIAL = "SEQUENTIAL"
CONCURRENT = "CONCURRENT"
AUTO = "AUTO"
#: HETERO_CONCURRENCY's values: subgraphs one after another, those whose inputs are ready at the same
#: time, or concurrent where the plan has branches that can overlap (the default)
MODES = (SEQUENTIAL, CONCURRENT, AUTO)
#: OpenVINO's CPU plugin pins the threads of its runs to cores it picks: beside another branch it put its
#: run on the core that branch's thread was pinned to (two LSTM branches: 3.7 ms, 2.1 ms with it off).
#: Its load_config key that leaves the threads where runtime.branches pins them
OPENVINO_PINNING = "ENABLE_CPU_PINNING"


@dataclass(frozen=True)
class Schedule:
    """How an inference runs a plan's subgraphs. ``after[i]``: the indexes of the subgraphs whose outputs
    subgraph i reads (the step graph); ``width``: the most subgraphs that can run at once (a largest set of
    which none feeds another, even through others); ``host_width``: the same among the subgraphs whose
    sessions compute on the host's cores (CPU, OpenVINO on the CPU); ``concurrent``: whether an inference
    starts every subgraph whose inputs are ready, each on a thread of its own, rather than one after
    another; ``threads``: the intra-op threads a host session gets where none is set for its device (None:
    the EP's own default), so that the sessions that run at once share the ``cores``."""

    after: tuple[tuple[int, ...], ...]
    width: int
    host_width: int
    concurrent: bool
    threads: int | None
    cores: int
    why: str = ""  # why subgraphs that could run at once run in turn, where another reason than the mode

    def in_turn(self, why: str) -> Schedule:
        """This schedule with the subgraphs run one after another, for the reason ``why``."""
        return dataclasses.replace(self, concurrent=False, threads=None, why=why)

    def settings(self, config: SplitConfig, device: Device) -> DeviceSettings:
        """``device``'s settings as its sessions get them under this schedule: ``config``'s, with
        ``threads`` for a host device where ``config`` sets none (INFERENCE_NUM_THREADS, num_of_threads),
        and, running side by side, OpenVINO on the CPU leaving its threads where the branches put them."""
        settings = config.settings(device)
        if not (self.concurrent and on_host(device)):
            return settings
        if self.threads is not None and not (
            settings.intra_op_num_threads or "num_of_threads" in settings.provider_options
        ):
            settings = config.with_threads([device.name], self.threads).settings(device)
        if device.kind.family == "OPENVINO":
            options = settings.provider_options
            loaded = json.loads(options.get("load_config") or "{}")
            if isinstance(loaded, dict) and isinstance(loaded.setdefault("CPU", {}), dict):
                loaded["CPU"].setdefault(OPENVINO_PINNING, "NO")
                options["load_config"] = json.dumps(loaded)
        return settings

    def together(self) -> list[tuple[int, ...]]:
        """Groups of subgraph indexes that can run at the same time (each a set of which none feeds
        another, through others neither), the largest first: what ``hetero query`` and the .dot file show."""
        reach = _reach(self.after)
        groups: list[tuple[int, ...]] = []
        for i in range(len(self.after)):
            group = [i]
            for j in range(i + 1, len(self.after)):
                if all(j not in reach[k] and k not in reach[j] for k in group):
                    group.append(j)
            if len(group) > 1 and not any(set(group) <= set(g) for g in groups):
                groups.append(tuple(group))
        return sorted(groups, key=len, reverse=True)

    @property
    def side_by_side(self) -> list[tuple[int, ...]]:
        """The groups of ``together`` an inference runs at the same time: none unless ``concurrent``."""
        return self.together() if self.concurrent else []

    def describe(self) -> str:
        """One line: how an inference runs the subgraphs, and the threads each host session gets."""
        if not self.concurrent:
            why = (
                "no two of them can run at once"
                if self.width < 2
                else self.why or "HETERO_CONCURRENCY=SEQUENTIAL"
            )
            return f"the subgraphs run one after another ({why})"
        groups = "; ".join("+".join(f"subgraph{i + 1}" for i in g) for g in self.together()[:3])
        threads = f"{self.threads} intra-op thread(s) per host session" if self.threads else "EP defaults"
        return (
            f"subgraphs whose inputs are ready run at the same time (at most {self.width} at once: {groups}); "
            f"{threads}, {self.cores} core(s) shared"
        )


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity on this platform: every core
        return os.cpu_count() or 1


def on_host(device: Device) -> bool:
    """Whether ``device``'s sessions compute on the host's cores: the CPU, and OpenVINO on the CPU."""
    return device.is_cpu or (
        device.kind.family == "OPENVINO" and device.provider_options.get("device_type") == "CPU"
    )


def parse_mode(value: object) -> str:
    """HETERO_CONCURRENCY's value, upper-case; ConfigError for any other."""
    mode = str(value).strip().upper()
    if mode not in MODES:
        raise ConfigError(
            f"HETERO_CONCURRENCY takes {', '.join(MODES)}, not {value!r:.40}: SEQUENTIAL runs the subgraphs one "
            "after another, CONCURRENT starts every subgraph whose inputs are ready, AUTO (the default) does "
            "so where the plan has branches that can overlap"
        )
    return mode


def plan_schedule(
    plan: Plan,
    devices: Mapping[str, Device],
    config: SplitConfig,
    value_type: Callable[[str], Any] | None = None,
) -> Schedule:
    """The Schedule of ``plan``, its subgraphs on ``devices`` (by name), under ``config``'s
    HETERO_CONCURRENCY on the cores this process may use, the threads ``config`` sets checked against
    them (within_cores), and in turn where its subgraphs pass strings, sequences or maps (strings_in_turn,
    with ``value_type``: the model's onnx TypeProto of a tensor; None: not checked): what a compile
    decides, and what ``hetero query`` shows. ConfigError where CONCURRENT was asked and the threads set
    for sessions that would run at once exceed the cores."""
    host = [name for name, device in devices.items() if on_host(device)]
    schedule = schedule_of(plan, host, config.concurrency, available_cores())
    schedule = within_cores(schedule, plan, devices, config)
    return schedule if value_type is None else strings_in_turn(schedule, plan, value_type)


#: why a plan whose subgraphs pass strings, sequences or maps runs in turn (strings_in_turn)
NON_TENSORS = (
    "its subgraphs pass strings, sequences or maps: run beside an OpenVINO session, such runs crashed "
    "OpenVINO's CPU plugin now and then (ONNX Runtime 1.24.1, onnxruntime-openvino; cause not found)"
)


def strings_in_turn(schedule: Schedule, plan: Plan, value_type: Callable[[str], Any]) -> Schedule:
    """``schedule`` run in turn (NON_TENSORS) where a subgraph of ``plan`` reads or makes a value that is
    no numeric tensor (``value_type(name)``: its onnx TypeProto, None where unknown): a string tensor, a
    sequence or a map. The CPU EP running such a subgraph beside an OpenVINO session crashed the latter in
    about one in six runs of the runtime tests; in turn, never seen."""
    if not schedule.concurrent:
        return schedule
    names = {t for s in plan.subgraphs for t in (*s.inputs, *s.outputs)}
    for name in names:
        kind = value_type(name)
        if kind is not None and (
            not kind.HasField("tensor_type") or kind.tensor_type.elem_type == onnx.TensorProto.STRING
        ):
            return schedule.in_turn(NON_TENSORS)
    return schedule


def within_cores(
    schedule: Schedule, plan: Plan, devices: Mapping[str, Device], config: SplitConfig
) -> Schedule:
    """``schedule``, where the intra-op threads of the host sessions it runs at once add up to at most its
    cores: those ``config`` sets for their devices (INFERENCE_NUM_THREADS, num_of_threads), the schedule's
    share for the others (one each, where more run at once than there are cores, is the least and
    passes). Over them, AUTO runs the subgraphs in turn (it says why) and CONCURRENT is a
    ConfigError: the user's budget and the mode cannot both hold."""
    if not schedule.concurrent:
        return schedule
    device_of = {s.index: s.device for s in plan.subgraphs}

    def threads(index: int) -> int:
        device = devices[device_of[index]]
        settings = config.settings(device)
        own = settings.intra_op_num_threads or settings.provider_options.get("num_of_threads")
        return int(own) if own else schedule.threads or 1

    for group in schedule.together():
        host = [i for i in group if on_host(devices[device_of[i]])]
        total = sum(threads(i) for i in host)
        if len(host) < 2 or total <= max(schedule.cores, len(host)):  # one thread each is the least
            continue
        names = " + ".join(f"subgraph{i + 1} ({device_of[i]}) {threads(i)}" for i in host)
        why = f"their intra-op threads, {names}, exceed the {schedule.cores} core(s) this process may use"
        if config.concurrency == CONCURRENT:
            raise ConfigError(
                f"HETERO_CONCURRENCY=CONCURRENT runs subgraphs side by side, but {why}: lower "
                "INFERENCE_NUM_THREADS of those devices so that they add up to the cores (or leave it unset: "
                "the cores are then shared), or set HETERO_CONCURRENCY=SEQUENTIAL"
            )
        return schedule.in_turn(why)
    return schedule


def schedule_of(plan: Plan, host: Collection[str], mode: str, cores: int) -> Schedule:
    """The Schedule of ``plan`` under HETERO_CONCURRENCY ``mode`` (parse_mode's) on a machine of ``cores``
    cores; ``host``: the plan's devices whose sessions compute on those cores. Concurrent where ``mode``
    is CONCURRENT, or AUTO and two subgraphs can run at once; the host sessions then get ``cores`` shared
    between the most of them that run at once (at least one thread each)."""
    after = _after(plan)
    width = _width(after, range(len(after)))
    host_width = _width(after, [s.index for s in plan.subgraphs if s.device in host])
    concurrent = width > 1 and mode != SEQUENTIAL
    threads = max(1, cores // host_width) if concurrent and host_width > 1 else None
    return Schedule(after, width, host_width, concurrent, threads, cores)


def _after(plan: Plan) -> tuple[tuple[int, ...], ...]:
    """For each subgraph, the subgraphs whose outputs it reads."""
    producer = {t: s.index for s in plan.subgraphs for t in s.outputs}
    return tuple(
        tuple(dict.fromkeys(producer[t] for t in s.inputs if t in producer and producer[t] != s.index))
        for s in plan.subgraphs
    )


def _reach(after: Sequence[Sequence[int]]) -> list[set[int]]:
    """For each subgraph, every subgraph it reads from, through others too (the transitive closure)."""
    reach: list[set[int]] = []
    for i, preds in enumerate(after):  # a plan's subgraphs are in topological order
        found = set(preds)
        for p in preds:
            if p < i:
                found |= reach[p]
        reach.append(found)
    return reach


def _width(after: Sequence[Sequence[int]], among: Collection[int]) -> int:
    """The largest set of subgraphs in ``among`` of which none reads from another, through others neither
    (Dilworth: their count less a largest matching of the comparability graph)."""
    nodes = list(among)
    if len(nodes) < 2:
        return len(nodes)
    reach = _reach(after)
    below = {i: [j for j in nodes if i in reach[j]] for i in nodes}  # i reaches j: i before j
    match: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in below[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in match or augment(match[j], seen):
                match[j] = i
                return True
        return False

    matched = sum(augment(i, set()) for i in nodes)
    return len(nodes) - matched
