"""CompiledSubgraph: one subgraph of a plan with the ONNX Runtime session that runs it, a frozen value the
compile side makes and the request side runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..placement.devices import Device
from ..placement.partition import Subgraph

#: execution providers whose outputs live in host memory
HOST_EPS = frozenset({"CPUExecutionProvider", "OpenVINOExecutionProvider"})


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: each is one session
class CompiledSubgraph:
    """A plan subgraph with its ORT session and what ORT really did with its nodes; never changed.

    Made by the compile (read them as ``compiled.subgraphs``, in execution order). ``session``: the
    onnxruntime.InferenceSession; ``placement``: ((EP, ((node, op type), ...)), ...) as ORT assigned the
    nodes; ``profiler``: set when profiling is on (PERF_COUNT); ``from_probe``: the session is a query
    probe (of the whole model, or of a part), compiled once; ``label``: what the session runs where that
    is several subgraphs (one ORT session for a whole split).
    """

    subgraph: Subgraph
    target: Device
    session: Any
    placement: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
    profiler: Any = None
    from_probe: bool = False
    label: str = ""

    def __post_init__(self) -> None:
        placement = tuple((ep, tuple(tuple(p) for p in placed)) for ep, placed in self.placement)
        object.__setattr__(self, "placement", placement)  # ORT's lists, frozen

    @property
    def index(self) -> int:
        """Place in execution order, from 0."""
        return self.subgraph.index

    @property
    def name(self) -> str:
        """``subgraph<N>``, N from 1."""
        return self.subgraph.name

    @property
    def device(self) -> str:
        """Canonical name of the device this subgraph was compiled for."""
        return self.target.name

    @property
    def where(self) -> str:
        """``subgraph<N> on <device>``, or the label of a session that runs several subgraphs (messages)."""
        return self.label or f"{self.name} on {self.device}"

    @property
    def nodes(self) -> tuple[str, ...]:
        """Friendly names of the model's nodes this subgraph owns."""
        return self.subgraph.nodes

    @property
    def inputs(self) -> tuple[str, ...]:
        """Tensor names it reads from model inputs or earlier subgraphs."""
        return self.subgraph.inputs

    @property
    def outputs(self) -> tuple[str, ...]:
        """Tensor names it hands to later subgraphs or to the caller."""
        return self.subgraph.outputs

    @property
    def fallback_nodes(self) -> list[tuple[str, str, str]]:
        """(node, op type, EP) for nodes ORT ran on another EP than the device's own."""
        return [
            (name, op, ep) for ep, placed in self.placement if ep != self.target.ep for name, op in placed
        ]

    @property
    def on_host(self) -> bool:
        """True when the subgraph's outputs live in host memory (CPU and OpenVINO EPs)."""
        return self.target.ep in HOST_EPS

    @property
    def description(self) -> str:
        """Device, node count, and any nodes ORT placed elsewhere - never hidden."""
        text = f"{self.name}: {self.device} ({self.target.ep}), {len(self.nodes)} node(s)"
        fallback = self.fallback_nodes
        if fallback:
            eps = sorted({ep for _, _, ep in fallback})
            text += (
                f"; ORT ran part of it on {', '.join(eps)} instead (nodes as ORT names them after its "
                f"optimizations): "
                + ", ".join(f"{n} ({op})" for n, op, _ in fallback[:5])
                + (" ..." if len(fallback) > 5 else "")
            )
        return text
