"""The operators a model's nodes name, checked against onnx's operator schemas when the model is read: an
op ONNX does not define, or not yet in the model's opset, is the model's fault (ModelError), not a
device's, and no execution provider needs to see the model to tell.

Only the domains onnx's schema registry defines are checked (the default domain and ai.onnx.ml); calls of
the model's own functions and ops of other domains (com.microsoft, custom ones) are left to the runtime.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import onnx
from onnx import defs

from ..errors import ModelError

_ALIASES = {"ai.onnx": ""}


@dataclass(frozen=True)
class OpUse:
    """One node of a checked domain: the node, its domain ("" for ai.onnx) and the opset version the
    model (or the function holding it) imports for that domain, None where it imports none."""

    node: onnx.NodeProto
    domain: str
    version: int | None

    @property
    def label(self) -> str:
        """The node for a message: "node 'y' (Add)", or "an unnamed Add node"."""
        if self.node.name:
            return f"node {self.node.name!r} ({self.node.op_type})"
        return f"an unnamed {self.node.op_type} node"

    @property
    def opset_text(self) -> str:
        """'opset 17', or 'ai.onnx.ml opset 3'."""
        return f"{self.domain + ' ' if self.domain else ''}opset {self.version}"


def op_uses(proto: onnx.ModelProto) -> Iterator[OpUse]:
    """Every node of the default domain and ai.onnx.ml in the graph, its bodies (If, Loop, Scan) and the
    model's functions (with their own opset imports), calls of the model's functions left out."""
    local = {(_domain(f.domain), f.name) for f in proto.functions}
    model_imports = _imports(proto.opset_import)
    yield from _uses(proto.graph.node, model_imports, local)
    for function in proto.functions:
        imports = {**model_imports, **_imports(function.opset_import)}
        yield from _uses(function.node, imports, local)


def check_operators(proto: onnx.ModelProto, where: str) -> None:
    """ModelError naming the first node whose op onnx's schemas say cannot be: an op in a domain the model
    imports no opset of, an op ONNX does not define, or one not yet defined in the model's opset (what to
    convert to). Opsets newer than this onnx knows are not judged."""
    newest = {"": defs.onnx_opset_version(), "ai.onnx.ml": defs.onnx_ml_opset_version()}
    for use in op_uses(proto):
        if use.version is None:
            raise ModelError(
                f"{where}: {use.label} is in domain {use.domain or 'ai.onnx'!r}, of which the model "
                "imports no opset (opset_import): the model is corrupt; re-export it"
            )
        if use.version > newest[use.domain]:
            continue
        first = first_version(use.node.op_type, use.domain)
        domain = f"domain {use.domain!r}" if use.domain else "the default domain"
        if first is None:
            raise ModelError(
                f"{where}: {use.label} names no ONNX operator ({use.node.op_type!r} is not defined in "
                f"{domain}): the model is corrupt, or the op belongs in a custom domain; fix or re-export it"
            )
        if first > use.version:
            raise ModelError(
                f"{where}: {use.label} uses {use.node.op_type}, which does not exist in "
                f"{use.opset_text} (ONNX added it in opset {first}): convert the model to opset {first} or "
                "later (onnx.version_converter.convert_version), or re-export it"
            )


def since_version(use: OpUse, version: int | None = None) -> int | None:
    """The version of ``use``'s op in effect at opset ``version`` (the model's where None): the opset it
    last changed in; None where onnx defines no such op there."""
    at = use.version if version is None else version
    if at is None:
        return None
    try:
        return defs.get_schema(use.node.op_type, at, use.domain).since_version
    except defs.SchemaError:
        return None


@functools.cache
def first_version(op_type: str, domain: str) -> int | None:
    """The opset ``op_type`` first appeared in, in ``domain`` of onnx's schemas; None where onnx defines no
    such op. Walked back one schema at a time from the newest: the schemas of every op (what
    get_all_schemas_with_history builds) would hold 10 MiB for the process's life."""
    try:
        version = defs.get_schema(op_type, _ANY_OPSET, domain).since_version
    except defs.SchemaError:
        return None
    while version > 1:
        try:
            version = defs.get_schema(op_type, version - 1, domain).since_version
        except defs.SchemaError:
            break
    return version


#: an opset above every version onnx will define: get_schema's bound for an op's newest schema
_ANY_OPSET = 2**31 - 1


def _uses(
    nodes: Sequence[onnx.NodeProto], imports: dict[str, int], local: set[tuple[str, str]]
) -> Iterator[OpUse]:
    for node in nodes:
        domain = _domain(node.domain)
        if domain in ("", "ai.onnx.ml") and (domain, node.op_type) not in local:
            yield OpUse(node, domain, imports.get(domain))
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _uses(attr.g.node, imports, local)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for graph in attr.graphs:
                    yield from _uses(graph.node, imports, local)


def _imports(opsets: Sequence[onnx.OperatorSetIdProto]) -> dict[str, int]:
    return {_domain(o.domain): o.version for o in opsets}


def _domain(domain: str) -> str:
    return _ALIASES.get(domain, domain)


def older_than(proto: onnx.ModelProto, oldest: int) -> list[OpUse]:
    """The default-domain nodes whose op, at the model's opset, is a version older than opset ``oldest``
    that changed by then (Add at opset 6 is Add-6, and opset 7 has Add-7): a runtime that supports opsets
    from ``oldest`` on has no kernel for them. Ops unchanged since (Relu-6 at opset 6) are not listed."""
    return [
        use
        for use in op_uses(proto)
        if use.domain == ""
        and use.version is not None
        and use.version < oldest
        and since_version(use) != since_version(use, oldest)
    ]
