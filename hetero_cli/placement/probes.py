"""The query's probe sessions a compile may use as its own: a probe, where ORT placed its nodes, and the
settings it was created with (so that a compile can tell whether it is the session it would create)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..graph import Model, Node
from ..ort.session import ort
from .devices import Device
from .union_find import UnionFind

__all__ = ["Placement", "Probe", "Probes", "SessionSettings", "cut_after", "session_settings"]

# [(ep name, [(node name, op type), ...]), ...]: which EP ORT gave which node of a session (assignment)
Placement = list[tuple[str, list[tuple[str, str]]]]


@dataclass(frozen=True)
class Probe:
    """A probe session (of the whole model, or of a part: Probes.parts), the provider list and intra-op
    threads it was created with, where ORT placed its nodes, whether its thread pool stops spinning when a
    run returns (``shared``: session.force_spinning_stop, as a compile of several subgraphs sets it), and
    the operations of a part's probe (None: the whole model)."""

    providers: list[Any]
    session: ort.InferenceSession
    placement: Placement
    intra_op_num_threads: int | None = None
    shared: bool = False
    nodes: frozenset[str] | None = None


# A compile's settings for a device's sessions: (provider options, intra-op threads or None); None for the
# options: the device's own
SessionSettings = tuple[Mapping[str, str] | None, int | None]


class Probes(dict[str, Probe]):
    """The query's whole-model probes a compile may use as its sessions, by device name, and the settings
    the compile gives each device's sessions (so that probes are created with them).

    Core makes one for a query + compile and hands it to the query functions (which keep, here, the
    probes of devices whose EP compiles the graph itself) and then to compile_plan: a plan that is one
    such device uses its probe as its session instead of compiling the model a second time (the OpenVINO
    EP compiles while a session is created).

    ``parts``: by device name, the probes of the parts of a model a device's query cut it into before
    probing (the nodes before and after those it is known to fail on), and the CPU's probe of the nodes
    an earlier device left where they are one connected piece (query._rest_loads); a compile of several
    subgraphs uses one as the session of a subgraph it serves exactly (compiler._serves).
    """

    def __init__(self, settings: Mapping[str, SessionSettings] | None = None) -> None:
        super().__init__()
        self.settings: dict[str, SessionSettings] = dict(settings or {})
        self.parts: dict[str, list[Probe]] = {}

    def clear(self) -> None:
        """Drop every probe, the parts' too (their sessions are freed once nothing else holds them)."""
        super().clear()
        self.parts.clear()


def session_settings(device: Device, probes: Probes | None) -> SessionSettings:
    """The provider options and threads ``device``'s sessions get (``probes``' settings; none without)."""
    return probes.settings.get(device.name, (None, None)) if probes is not None else (None, None)


def cut_after(model: Model, nodes: Sequence[Node], left_out: Collection[str]) -> list[list[Node]]:
    """``nodes`` (of ``model``, in its order) in parts: first those that read nothing the ``left_out``
    nodes (friendly names) make, directly or through other nodes, then the others; each of the two cut
    into its connected pieces (nodes linked by a tensor one makes and another reads), in model order.

    A query probes the parts apart where it leaves out nodes its device is known to fail on: a part is
    then the subgraph a compile gives that device, and its probe can be that subgraph's session (a probe
    of all of them at once reads what the left-out nodes make: no subgraph's inputs).
    """
    tainted: set[str] = set()
    for node in model.get_ops():
        if node.friendly_name in left_out or any(t in tainted for t in node.inputs):
            tainted.update(node.outputs)
    before = [n for n in nodes if not any(t in tainted for t in n.inputs)]
    after = [n for n in nodes if any(t in tainted for t in n.inputs)]
    return [*_connected(before), *_connected(after)]


def _connected(nodes: Sequence[Node]) -> list[list[Node]]:
    """``nodes`` in their connected pieces: two nodes are in one where one reads a tensor the other makes
    (through other nodes of ``nodes``); each piece in the order of ``nodes``, by its first node."""
    links = UnionFind(len(nodes))
    maker = {t: i for i, n in enumerate(nodes) for t in n.outputs}
    for i, node in enumerate(nodes):
        for t in node.inputs:
            if t in maker:
                links.union(i, maker[t])
    return [[nodes[i] for i in piece] for piece in links.groups(range(len(nodes)))]
