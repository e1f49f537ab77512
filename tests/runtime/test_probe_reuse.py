"""Which query probe a compile may use as a subgraph's session (compiler._serves): one created as that
session would be, over the same operations, inputs and (at least) outputs."""

from __future__ import annotations

from support.helpers import chain_model

import hetero_cli as hc
from hetero_cli.ort.session import ort
from hetero_cli.placement.devices import lookup
from hetero_cli.placement.probes import Probe
from hetero_cli.runtime.compiler import _serves


def test_a_parts_probe_serves_only_the_subgraph_of_its_own_operations():
    proto = chain_model()
    (subgraph,) = hc.Core().plan(proto, "HETERO:CPU").subgraphs
    providers = lookup("CPU").providers(None)
    session = ort.InferenceSession(proto.SerializeToString(), providers=providers)
    mine = Probe(providers, session, [], None, shared=True, nodes=frozenset(subgraph.nodes))
    assert _serves(mine, subgraph, providers, None, True)
    # the same inputs and outputs, other operations (say, more of them ran there): not that session
    other = Probe(providers, session, [], None, shared=True, nodes=frozenset(subgraph.nodes[1:]))
    assert not _serves(other, subgraph, providers, None, True)
    # made without force_spinning_stop, or with other threads: not the session the compile would make
    assert not _serves(mine, subgraph, providers, None, False)
    assert not _serves(mine, subgraph, providers, 1, True)
