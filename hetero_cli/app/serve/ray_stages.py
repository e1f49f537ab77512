"""What the Ray engine deploys, decided without Ray: one Stage per subgraph of a plan (its model, its device,
where its inputs come from) and what each stage's replicas ask Ray for.

    stages = stages_of(model, plan)
    options = actor_options("OPENVINO", ray.cluster_resources(), replicas=2)

Resources: a subgraph on a CUDA or TensorRT device asks for ``num_gpus``; one on another device the
cluster declares as a custom resource of that name (``ray start --resources='{"OPENVINO": 1}'``) asks for
that resource; the rest (CPU, and devices the cluster does not declare) ask for ``num_cpus``. The replicas
of one stage share one unit of a device resource (each asks for 1/N of it), so ``--replicas`` never asks
for more devices than a node declares.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ...graph import Model
from ...placement import devices as registry
from ...placement.config import NUM_THREADS, SplitConfig
from ...placement.export import subgraph_model
from ...placement.partition import CONSTANT, Plan
from ...runtime.compiler import constant_outputs

#: device families that run on an NVIDIA GPU (Ray's ``num_gpus``)
GPU_FAMILIES = ("GPU", "TENSORRT")
#: the CPUs a CPU stage's replica asks for
CPU_STAGE_CPUS = 1.0


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


def actor_options(device: str, cluster: Mapping[str, float], replicas: int = 1) -> dict[str, object]:
    """Ray actor options for a replica of a stage on ``device``, on a cluster with ``cluster`` resources
    (``ray.cluster_resources()``), where the stage runs ``replicas`` replicas: ``num_gpus`` for a CUDA or
    TensorRT device, the custom resource named after the device where the cluster declares it (with no
    CPU asked: the device runs the stage), ``num_cpus`` otherwise. Raises ValueError for replicas < 1."""
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, not {replicas}")
    share = 1.0 / replicas
    family = resource_name(device)
    if family in GPU_FAMILIES:
        return {"num_cpus": 0, "num_gpus": share}
    if family != "CPU" and cluster.get(family, 0) > 0:
        return {"num_cpus": 0, "resources": {family: share}}
    return {"num_cpus": CPU_STAGE_CPUS}


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
