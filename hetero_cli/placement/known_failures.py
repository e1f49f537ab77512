"""Nodes an execution provider is known to fail on (or to abort the process on), by the quirk records in
force that refuse nodes (openvino-outer-scope-loop, openvino-loop-body-partitioned, openvino-lstm-peepholes):
the query never hands them to the EP's probe, and a compile refuses them with a CompileError before ORT
tries."""

from __future__ import annotations

from ..graph import Node
from ..quirks import Quirk, node_refusals
from .devices import KINDS, Device

# Nodes an execution provider is known not to compile, where ORT would fail or even abort the process (an
# exception thrown through C++ code that cannot pass it on): refused up front with a CompileError instead.
# {device family: the quirk records in force that refuse nodes (openvino-outer-scope-loop,
# openvino-loop-body-partitioned)}
KNOWN_FAILURES: dict[str, tuple[Quirk, ...]] = {
    kind.family: quirks for kind in KINDS if (quirks := node_refusals(kind.ep))
}


def known_failure(node: Node, device: Device) -> Quirk | None:
    """The first quirk of KNOWN_FAILURES by which ``device``'s EP is known to fail (or abort the process)
    on ``node``, or None where none is."""
    proto = node.proto
    reads_outer = bool(node.implicit_inputs)
    return next(
        (
            q
            for q in KNOWN_FAILURES.get(device.kind.family, ())
            if q.refuses(proto.op_type, proto.domain, reads_outer, proto.input)
        ),
        None,
    )


def known_to_fail(node: Node, device: Device) -> bool:
    """Whether ``device``'s EP is known to fail (or abort the process) on ``node`` (known_failure)."""
    return known_failure(node, device) is not None
