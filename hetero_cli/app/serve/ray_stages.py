"""What the Ray engine deploys, decided without Ray: one Stage per subgraph of a plan (its model, its device,
where its inputs come from) and what each stage's replicas ask Ray for.

    stages = stages_of(model, plan)
    options = actor_options("OPENVINO", ray.cluster_resources(), replicas=2)

Resources: a subgraph on a CUDA or TensorRT device asks for ``num_gpus``; one on another device the
cluster declares as a custom resource of that name (``ray start --resources='{"OPENVINO": 1}'``) asks for
that resource; the rest (CPU, and devices the cluster does not declare) ask for ``num_cpus``. The stages on
one device, and their replicas, share one unit of its resource (k stages with N replicas each: each replica
asks for 1/(k*N)), as the subgraphs of a split share their device in one process: a plan never asks for
more of a device than one unit, however many of its subgraphs the device runs. ``check_capacity`` tells a
cluster that declares less than the plan's asks before anything is deployed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import ServeError
from ...graph import Model
from ...placement import devices as registry
from ...placement.config import NUM_THREADS, SplitConfig
from ...placement.export import subgraph_model
from ...placement.partition import CONSTANT, Plan
from ...runtime.constants import constant_outputs

#: device families that run on an NVIDIA GPU (Ray's ``num_gpus``)
GPU_FAMILIES = ("GPU", "TENSORRT")
#: the CPUs a CPU stage's replica asks for
CPU_STAGE_CPUS = 1.0
#: what sums of Ray resources may exceed a declared amount by and still fit (Ray counts in 1/10000 units)
RESOURCE_SLACK = 1e-6


@dataclass(frozen=True)
class Stage:
    """One subgraph as a Ray Serve deployment runs it: ``name`` (subgraph<N>, the deployment's name too),
    ``device`` (the plan's device for it), ``model`` (the subgraph as a standalone ONNX model, weights
    included), ``inputs`` / ``outputs`` (its boundary tensors), ``feeds`` (the model inputs it reads),
    ``upstream`` (the indexes of the earlier stages whose outputs it reads, in order) and ``config`` (what
    its replicas compile it with: replica_config)."""

    index: int
    name: str
    device: str
    model: bytes
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    feeds: tuple[str, ...]
    upstream: tuple[int, ...]
    config: Mapping[str, object]


@dataclass(frozen=True)
class Wiring:
    """How a request runs through the stages: ``stages`` in execution order; ``sinks`` (the stages whose
    answers the ingress waits for: those producing model outputs), ``outputs`` ({model output: stage index,
    or "input" / "constant"}), ``constants`` (the values of constant model outputs)."""

    stages: tuple[Stage, ...]
    sinks: tuple[int, ...]
    outputs: Mapping[str, int | str]
    constants: Mapping[str, np.ndarray]


def stages_of(model: Model, plan: Plan, config: SplitConfig | None = None) -> Wiring:
    """The Wiring of ``plan`` (from Core.plan on ``model``): each subgraph exported as a model of its own,
    compiled by its replicas with what ``config`` (the compile's) sets for its device (replica_config).

    Raises ModelError where a subgraph's boundary tensor has no type onnx or ONNX Runtime can tell.
    """
    producer = {t: sg.index for sg in plan.subgraphs for t in sg.outputs}
    model_inputs = set(plan.inputs)
    stages = []
    for sg in plan.subgraphs:
        upstream = dict.fromkeys(producer[t] for t in sg.inputs if t in producer)
        stages.append(
            Stage(
                index=sg.index,
                name=sg.name,
                device=sg.device,
                model=subgraph_model(model, sg, embed=True).SerializeToString(),
                inputs=tuple(sg.inputs),
                outputs=tuple(sg.outputs),
                feeds=tuple(t for t in sg.inputs if t in model_inputs and t not in producer),
                upstream=tuple(upstream),
                config=replica_config(sg.device, config),
            )
        )
    sources = dict(plan.output_sources)
    sinks = tuple(dict.fromkeys(s for s in sources.values() if isinstance(s, int)))
    constants = constant_outputs(model, plan) if CONSTANT in sources.values() else {}
    return Wiring(tuple(stages), sinks, sources, constants)


def resource_name(device: str) -> str:
    """The Ray resource a device stands for: its family, before any ``.`` (OPENVINO.GPU -> OPENVINO)."""
    return device.split(".", 1)[0]


def device_unit(device: str) -> str:
    """The device a stage on ``device`` takes a share of: a GPU by its index (GPU.1 and TENSORRT.1 are one
    GPU; GPU is GPU.0), any other device by its resource (OPENVINO.GPU and OPENVINO share OPENVINO)."""
    family, _, index = device.partition(".")
    if family in GPU_FAMILIES:
        return f"GPU.{index or 0}"
    return family


def actor_options(
    device: str, cluster: Mapping[str, float], replicas: int = 1, sharing: int = 1
) -> dict[str, object]:
    """Ray actor options for a replica of a stage on ``device``, on a cluster with ``cluster`` resources
    (``ray.cluster_resources()``), where the stage runs ``replicas`` replicas and ``sharing`` stages of the
    plan (this one included) run on its device: ``num_gpus`` for a CUDA or TensorRT device, the custom
    resource named after the device where the cluster declares it (with no CPU asked: the device runs the
    stage), each 1/(replicas*sharing) of one unit; ``num_cpus`` otherwise (CPU_STAGE_CPUS: a CPU stage's
    replica has its CPU). Raises ValueError for replicas or sharing < 1."""
    if replicas < 1 or sharing < 1:
        raise ValueError(f"replicas and sharing must be at least 1, not {replicas} and {sharing}")
    share = 1.0 / (replicas * sharing)
    family = resource_name(device)
    if family in GPU_FAMILIES:
        return {"num_cpus": 0, "num_gpus": share}
    if family != "CPU" and cluster.get(family, 0) > 0:
        return {"num_cpus": 0, "resources": {family: share}}
    return {"num_cpus": CPU_STAGE_CPUS}


def plan_options(
    devices: Sequence[str], cluster: Mapping[str, float], replicas: int = 1
) -> list[dict[str, object]]:
    """actor_options for each stage of a plan whose stages run on ``devices`` (in order): the stages on one
    device (device_unit) share its unit. Raises ValueError for replicas < 1."""
    sharing = Counter(device_unit(d) for d in devices)
    return [actor_options(d, cluster, replicas, sharing[device_unit(d)]) for d in devices]


def resource_asks(options: Mapping[str, object]) -> dict[str, float]:
    """What actor ``options`` (actor_options') ask Ray for, by resource name as Ray declares them (CPU,
    GPU, custom resources); zero asks left out."""
    asks: dict[str, float] = {}
    for key, name in (("num_cpus", "CPU"), ("num_gpus", "GPU")):
        amount = options.get(key)
        if isinstance(amount, int | float) and amount > 0:
            asks[name] = float(amount)
    custom = options.get("resources")
    if isinstance(custom, Mapping):
        asks.update({name: float(amount) for name, amount in custom.items() if amount > 0})
    return asks


def check_capacity(
    stages: Sequence[tuple[str, Mapping[str, object]]],
    replicas: int,
    nodes: Sequence[Mapping[str, float]],
) -> None:
    """ServeError, naming the resource, where a cluster whose alive nodes declare ``nodes`` resources cannot
    hold every replica of ``stages`` ((description, actor options) each, ``replicas`` replicas apiece): one
    replica asks for more than any node declares, or all of them for more than the nodes declare in all.
    A plan that passes may still wait for resources other work holds (the deploy reports that)."""
    need: dict[str, float] = {}
    askers: dict[str, list[str]] = {}
    for description, options in stages:
        for name, amount in resource_asks(options).items():
            most = max((node.get(name, 0.0) for node in nodes), default=0.0)
            if amount > most + RESOURCE_SLACK:
                raise ServeError(
                    f"{description} asks Ray for {name} {amount:g} per replica, and no node of the cluster "
                    f"declares that much (the most: {most:g}): start a node that declares it "
                    f"({_declaring(name)})"
                )
            need[name] = need.get(name, 0.0) + amount * replicas
            askers.setdefault(name, []).append(f"{description} {replicas} x {amount:g}")
    for name, amount in need.items():
        declared = sum(node.get(name, 0.0) for node in nodes)
        if amount > declared + RESOURCE_SLACK:
            fewer = ", or give fewer --replicas" if name == "CPU" else ""  # a device's stages share one unit
            raise ServeError(
                f"the Ray cluster declares too little {name} for this split: its stages ask for {name} "
                f"{amount:g} in all ({', '.join(askers[name])}), its nodes declare {declared:g}: start "
                f"nodes that declare more ({_declaring(name)}){fewer}"
            )


def _declaring(name: str) -> str:
    """How ``ray start`` declares ``name``."""
    if name == "CPU":
        return "ray start --num-cpus=N"
    if name == "GPU":
        return "ray start --num-gpus=N on a node with GPUs"
    return f"ray start --resources='{{\"{name}\": 1}}'"


def replica_device(device: str) -> str:
    """The device name a replica compiles its subgraph for: a GPU device's index is Ray's to choose (it sets
    CUDA_VISIBLE_DEVICES, so the replica's GPU is always its first), other names stay as they are."""
    family = resource_name(device)
    return family if family in GPU_FAMILIES else device


def replica_config(device: str, config: SplitConfig | None = None) -> dict[str, object]:
    """The compile config of a replica of a stage on ``device`` (the plan's name for it), for the device the
    replica compiles for (replica_device): what ``config``, the compile's, sets for that device (its own
    keys and provider options, and HETERO's PERF_COUNT), so that the replica runs its subgraph as the
    compile's session did. A CPU stage's replica that ``config`` gives no INFERENCE_NUM_THREADS runs on
    the CPUs it asks Ray for (``num_cpus``, CPU_STAGE_CPUS), so its thread pool neither exceeds them nor
    spins on the cores the other stages' replicas and Ray's own processes run on (a two-thread pool
    spinning after each run took more CPU per request on a 2-core machine than the ingress and the proxy
    together)."""
    values = dict(config.device_values(registry.lookup(device))) if config is not None else {}
    if resource_name(device) == "CPU":
        values.setdefault(NUM_THREADS, max(1, int(CPU_STAGE_CPUS)))
    return {replica_device(device): values} if values else {}
