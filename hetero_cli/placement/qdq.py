"""Quantized models: a DequantizeLinear -> op -> QuantizeLinear group is never cut across devices.

In a QDQ model (int8 / uint8 activations) each quantized operation X shows up as DequantizeLinear (DQ)
nodes on its inputs, X itself in float, and QuantizeLinear (Q) nodes on its outputs; an execution provider
recognises the pattern and runs X on integers. A cut between a DQ and X, or between X and a Q, sends a
float tensor across devices instead of an int8 one (four times the bytes) and leaves each side with half a
pattern that it can only run in float: slower, and results that drift from the unsplit model's.

This pass adjusts the affinity map before partitioning: every non-constant DQ feeding X and every Q fed
by X takes X's affinity, so the cuts fall on the quantized tensors between groups. DQ nodes on constant
weights are constants already: the partition copies them into each subgraph that reads them. A DQ that
feeds several ops stays with the first of them (in topological order). In manual mode the groups moved
are logged as one warning (their count and the first few) and one debug line each; in automatic mode a
group whose device cannot run all of it goes, whole, to the first device in priority order that can.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..graph import Model, Node

log = logging.getLogger("hetero_cli")

QDQ_DOMAINS = frozenset({"", "ai.onnx", "com.microsoft"})
DEQUANTIZE = "DequantizeLinear"
QUANTIZE = "QuantizeLinear"


@dataclass(frozen=True)
class QdqGroup:
    """One quantized operation: the op, the DQ nodes on its inputs and the Q nodes on its outputs."""

    op: str
    dequantize: tuple[str, ...]
    quantize: tuple[str, ...]

    @property
    def members(self) -> tuple[str, ...]:
        """Friendly names of every node of the group, DQ first, the op, then Q."""
        return (*self.dequantize, self.op, *self.quantize)


def _is(node: Node, op_type: str) -> bool:
    return node.proto.op_type == op_type and node.proto.domain in QDQ_DOMAINS and not node.is_constant


def find_groups(model: Model) -> list[QdqGroup]:
    """The QDQ groups of ``model`` in topological order of their ops (constant DQ/Q nodes left out)."""
    readers: dict[str, list[Node]] = {}
    for node in model.get_ops():
        for name in dict.fromkeys(i for i in node.proto.input if i):  # direct inputs only
            readers.setdefault(name, []).append(node)
    groups = []
    for node in model.get_ops():
        if node.is_constant or _is(node, DEQUANTIZE) or _is(node, QUANTIZE):
            continue
        dequantize = [
            p.friendly_name
            for t in node.proto.input
            if t and (p := model.producer.get(t)) is not None and _is(p, DEQUANTIZE)
        ]
        quantize = [
            r.friendly_name
            for t in node.outputs
            for r in readers.get(t, ())
            if _is(r, QUANTIZE) and r.proto.input[0] == t
        ]
        if dequantize or quantize:
            groups.append(
                QdqGroup(node.friendly_name, tuple(dict.fromkeys(dequantize)), tuple(dict.fromkeys(quantize)))
            )
    return groups


def keep_groups_together(
    model: Model,
    affinities: Mapping[str, str],
    *,
    manual: bool,
    supports: Callable[[str, str], bool] | None = None,
    priorities: Sequence[str] = (),
) -> dict[str, str]:
    """``affinities`` ({friendly name: device}) with each QDQ group's DQ and Q nodes on its op's device.

    ``supports(device, node)`` says whether a device can run a node (automatic mode): a group its op's
    device cannot run whole moves, op included, to the first of ``priorities`` that can, else stays as it
    is. In manual mode (``manual=True``) the user's op affinity wins and the groups moved are logged: one
    warning for all of them, one debug line each (the CLI's --debug shows them).
    """
    out = dict(affinities)
    placed: set[str] = set()  # DQ nodes an earlier group took (a DQ feeding several ops)
    moves: list[tuple[QdqGroup, str, list[str]]] = []  # (group, its device, members moved), manual mode
    for group in find_groups(model):
        if group.op not in out:
            continue
        target = out[group.op]
        members = [m for m in (*group.dequantize, *group.quantize) if m not in placed and m in out]
        if not manual and supports is not None and not all(supports(target, m) for m in members):
            target = next((d for d in priorities if all(supports(d, m) for m in (group.op, *members))), "")
            if not target:
                continue
        moved = [m for m in (*members, group.op) if out[m] != target]
        for m in (*members, group.op):
            out[m] = target
        placed.update(members)
        if manual and moved:
            moves.append((group, target, moved))
    if moves:
        _report_moves(model, affinities, moves)
    return out


#: How many moved groups the one warning names; --debug lists every one.
NAMED_GROUPS = 3


def _report_moves(
    model: Model, affinities: Mapping[str, str], moves: Sequence[tuple[QdqGroup, str, list[str]]]
) -> None:
    """Log the manual affinities the pass overrode: one warning for all of them (a QDQ transformer has
    hundreds of groups, one line each buried the rest of the output), and one debug line per group."""
    named = ", ".join(
        f"{group.op!r} ({model.node(group.op).get_type_name()}) on {target}"
        for group, target, _ in moves[:NAMED_GROUPS]
    )
    more = f" and {len(moves) - NAMED_GROUPS} more" if len(moves) > NAMED_GROUPS else ""
    nodes = sum(len(moved) for _, _, moved in moves)
    log.warning(
        "%d QDQ group%s kept whole: %d DequantizeLinear/QuantizeLinear node%s moved to the device of the op "
        "they quantize, around %s%s (debug logging, --debug on the command line, lists each group). A "
        "DequantizeLinear -> op -> QuantizeLinear group is never cut across devices: the cut would carry "
        "float tensors instead of int8 and leave each side half a quantized pattern. To place them "
        "yourself, give each group's DequantizeLinear and QuantizeLinear nodes its op's affinity",
        len(moves),
        "" if len(moves) == 1 else "s",
        nodes,
        "" if nodes == 1 else "s",
        named,
        more,
    )
    for group, target, moved in moves:
        log.debug(
            "QDQ group around %r (%s) kept whole on %s: moved %s",
            group.op,
            model.node(group.op).get_type_name(),
            target,
            ", ".join(f"{m} (was {affinities[m]})" for m in moved),
        )
