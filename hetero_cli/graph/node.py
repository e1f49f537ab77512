"""Node: one top-level ONNX node as OpenVINO's API shows it (friendly name, type name, rt_info)."""

from __future__ import annotations

from typing import Any

import onnx

from .shared import GRAPH, GRAPHS

AFFINITY = "affinity"


class Node:
    """One top-level ONNX node with its friendly name and a mutable rt_info mapping (key "affinity").

    Made by Model (``model.get_ops()``), not by callers. ``index``: place in topological order;
    ``proto``: the NodeProto; ``inputs`` / ``outputs``: tensor names (a body's outer-scope reads included
    in ``inputs``); ``is_constant``: computable from constants alone (set by the model's index).
    """

    def __init__(
        self, index: int, proto: onnx.NodeProto, friendly_name: str, implicit_inputs: list[str]
    ) -> None:
        self.index = index
        self.proto = proto
        self.friendly_name = friendly_name
        self.outputs: tuple[str, ...] = tuple(filter(None, proto.output))
        direct = filter(None, proto.input)
        self.inputs: tuple[str, ...] = tuple(
            dict.fromkeys([*direct, *implicit_inputs] if implicit_inputs else direct)
        )
        self.implicit_inputs: tuple[str, ...] = tuple(implicit_inputs)
        self.is_constant = False
        self._rt_info: dict[str, Any] = {}
        for prop in proto.metadata_props:
            if prop.key == AFFINITY and prop.value:
                self._rt_info[AFFINITY] = prop.value

    def get_friendly_name(self) -> str:
        """The node's name when non-empty and unique in the graph, else one derived from its first output."""
        return self.friendly_name

    def get_type_name(self) -> str:
        """The op type, qualified with its domain when that is not the default ONNX one."""
        domain = self.proto.domain
        return self.proto.op_type if domain in ("", "ai.onnx") else f"{domain}.{self.proto.op_type}"

    def get_rt_info(self) -> dict[str, Any]:
        """Runtime info; set ``["affinity"] = "CPU"`` to pin the node to a device (manual mode)."""
        return self._rt_info

    @property
    def affinity(self) -> str | None:
        """The affinity set on this node, as a string, or None."""
        value = self._rt_info.get(AFFINITY)
        return None if value is None or str(value) == "" else str(value)

    @property
    def has_subgraphs(self) -> bool:
        """True for If, Loop, Scan and other nodes with graph attributes."""
        return any(a.type in (GRAPH, GRAPHS) for a in self.proto.attribute)

    def write_affinity(self) -> None:
        """Keep the node's affinity in its NodeProto's metadata_props (key "affinity"), replacing the one
        there, or dropping it where none is set: what ``Model.save`` writes."""
        props = self.proto.metadata_props
        kept = [(p.key, p.value) for p in props if p.key != AFFINITY]
        del props[:]
        for key, value in kept:
            props.add(key=key, value=value)
        if self.affinity is not None:
            props.add(key=AFFINITY, value=self.affinity)

    def __repr__(self) -> str:
        return f"<Node {self.friendly_name!r} {self.get_type_name()}>"
