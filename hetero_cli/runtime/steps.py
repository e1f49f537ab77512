"""A compiled model's subgraphs as the steps an inference runs, each with what its run needs worked out
once per request: inputs, outputs, when its tensors can be released, where its outputs go (host or device
memory), and whether they can be allocated ahead of time (static shapes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..ort.values import ELEMENT_TYPES, Shape, as_ort_value
from .shape_check import static_shapes

if TYPE_CHECKING:
    from ..graph import Model
    from ..placement.partition import Plan
    from .compiled_subgraph import CompiledSubgraph
    from .revision import Revision


@dataclass(frozen=True)
class Step:
    """What running one subgraph needs, worked out once per request."""

    compiled: CompiledSubgraph
    position: int  # place in execution order
    lane: str  # the device whose pipeline lane runs it asynchronously
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    overridable: tuple[str, ...]
    release: tuple[str, ...]
    # (shape, ONNX element type) of each output when they can be allocated once per request, else None
    buffers: tuple[tuple[Shape, int], ...] | None
    # each output's static shape as the session declares it, or None: what its first inference is checked
    # against (shape_check)
    shapes: tuple[Shape | None, ...]

    output_list: list[str]  # the outputs as the list ORT's run call takes, built once
    # per output of a device-memory (CUDA) subgraph: the device id to keep it on, or None to copy it to
    # host memory (a host session cannot read device memory, and the caller gets numpy arrays)
    placement: tuple[int | None, ...] = ()
    on_device: bool = False  # any output stays in device memory (the IOBinding path)
    # reads or makes what an OrtValue cannot wrap (string tensors, sequences, maps): run as ORT's
    # InferenceSession.run does, on Python values (numpy arrays, lists, dicts) it converts itself
    plain: bool = False
    reads_plain: bool = False  # reads a value a plain step made: OrtValues are made of them for the run
    # overridable initializers its session takes as inputs (its EP would fold them): fed their stored
    # value (an OrtValue, a numpy array for a plain step) when the caller gives none
    defaults: Mapping[str, Any] = field(default_factory=dict)


def plan_steps(revision: Revision) -> list[Step]:
    """The steps of ``revision``'s runs (its subgraphs' sessions), in execution order."""
    return steps_of(revision.model, revision.plan, revision.runs)


def steps_of(model: Model, plan: Plan, runs: Sequence[CompiledSubgraph]) -> list[Step]:
    """The steps of ``runs`` (sessions of ``model``'s subgraphs in ``plan``), in execution order."""
    last_use: dict[str, int] = {}
    readers: dict[str, list[CompiledSubgraph]] = {}
    for s in runs:
        for t in s.inputs:
            last_use[t] = s.index
            readers.setdefault(t, []).append(s)
    keep = set(plan.outputs)
    steps = []
    made_plain: set[str] = set()
    for position, s in enumerate(runs):
        required = {i.name for i in s.session.get_inputs()} & model.overridable_initializers
        declared = {i.name for i in s.session.get_overridable_initializers()} | required
        overridable = tuple(sorted(declared & model.overridable_initializers))
        defaults = {t: model.initializer_array(t) for t in sorted(required)}
        placement = _placement(s, readers, keep)
        plain = _plain(s)
        reads_plain = not plain and bool(made_plain.intersection(s.inputs))
        if plain:
            made_plain.update(s.outputs)
        steps.append(
            Step(
                compiled=s,
                position=position,
                lane=s.device,
                inputs=s.inputs,
                outputs=s.outputs,
                overridable=overridable,
                release=tuple(t for t, last in last_use.items() if last == s.index and t not in keep),
                buffers=_static_outputs(s) if not (overridable or plain or reads_plain) else None,
                shapes=static_shapes(s.session.get_outputs(), s.outputs),
                output_list=list(s.outputs),
                placement=placement,
                on_device=any(p is not None for p in placement),
                plain=plain,
                reads_plain=reads_plain,
                defaults=defaults if plain else {t: as_ort_value(a) for t, a in defaults.items()},
            )
        )
    return steps


def step_feeds(step: Step, values: Mapping[str, Any]) -> dict[str, Any]:
    """What ``step``'s session is fed, unbound: its inputs, the overridable initializers it takes (the
    caller's value, else the stored one), as OrtValues where it reads what a plain step made."""
    feeds = {t: values[t] for t in step.inputs}
    for t in step.overridable:
        if t in values:
            feeds[t] = values[t]
        elif t in step.defaults:
            feeds[t] = step.defaults[t]
    if step.reads_plain:
        feeds = {t: as_ort_value(v) for t, v in feeds.items()}
    return feeds


def _device_id(s: CompiledSubgraph) -> int:
    return int(s.target.provider_options.get("device_id", 0))


def _placement(
    s: CompiledSubgraph, readers: dict[str, list[CompiledSubgraph]], keep: set[str]
) -> tuple[int | None, ...]:
    """Where each output of device subgraph ``s`` goes: its device when only subgraphs on that same
    device read it, else host memory (ORT copies it there within the run)."""
    if s.on_host:
        return ()
    here = _device_id(s)
    return tuple(
        here
        if name not in keep and all(not r.on_host and _device_id(r) == here for r in readers.get(name, ()))
        else None
        for name in s.outputs
    )


def _plain(s: CompiledSubgraph) -> bool:
    """Whether a subgraph reads or makes a value that is not a numeric tensor (ORT's own types)."""
    args = [
        *s.session.get_inputs(),  # its boundary inputs, and overridable initializers fed as inputs
        *s.session.get_overridable_initializers(),
        *(o for o in s.session.get_outputs() if o.name in s.outputs),
    ]
    return any(not a.type.startswith("tensor(") or a.type == "tensor(string)" for a in args)


def _static_outputs(s: CompiledSubgraph) -> tuple[tuple[Shape, int], ...] | None:
    """Shapes and types of a host subgraph's outputs if all are static tensors; None otherwise.

    A profiled subgraph is left out: its profiler may swap the session between runs.
    """
    if not s.on_host or s.profiler is not None:
        return None
    meta = {o.name: o for o in s.session.get_outputs()}
    out = []
    for name in s.outputs:
        o = meta.get(name)
        element = ELEMENT_TYPES.get(o.type) if o is not None else None
        shape = o.shape if o is not None else None
        # ORT also reports [] when the declared and inferred shapes disagree: rank 0 counts as dynamic
        if element is None or not shape or not all(isinstance(d, int) and d >= 0 for d in shape):
            return None
        out.append((tuple(shape), element))
    return tuple(out)
