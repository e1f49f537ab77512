"""Forks: where one device's connected nodes hold branches that could run at the same time, cut them into
subgraphs of their own (HETERO_CONCURRENCY=CONCURRENT: partition's ``branches``).

Within a group of nodes (a subgraph to be), taken in topological order, a node is *in series* where no
edge of the group passes over it, counting an edge from the group's start into each node that reads
nothing of the group and one from each node that feeds nothing of it to the group's end (save a side
input, too light to be a branch, whose readers all read a node that reads the group, and a side output,
whose sources all feed one that feeds the group: a state's Unsqueeze beside an LSTM's sequence, an LSTM's
final state): what comes
before it reaches what comes after it only through it.
Between two such nodes (and before the first, after the last) lie the group's gaps; a gap whose nodes
fall into several weakly connected parts holds branches that do not need each other. Where the second
heaviest of them weighs MIN_SHARE of the group (a node weighs its weights' elements: the work it does per
output, roughly), or where two of them hold a recurrent node (an LSTM, GRU, RNN, Scan or Loop: its steps
run one after another, so intra-op threads cannot share its work and only a branch beside it can use
another core; weights undercount it, its small matrices are run once per step), every part of that gap
becomes a group of its own; the nodes in series and the gaps left
whole between two cut gaps stay together. The pieces follow each other in position order and every edge
runs forward, within a piece or to a later one, so the plan stays acyclic; no path leaves a piece through
another device's group and comes back (the groups were acyclic before the cut).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from .union_find import UnionFind

#: the least share of its group's weight the second heaviest branch of a gap carries for the gap to be cut:
#: a session of its own costs a run and a hand-over (tens of microseconds), which small branches do not repay
MIN_SHARE = 0.1


def split_forks(
    group: Sequence[int],
    preds: Sequence[Sequence[int]],
    weight: Callable[[int], float],
    recurrent: Callable[[int], bool] = lambda k: False,
) -> list[int]:
    """``group`` (a group id per node, nodes in topological order; ``preds[k]``: the nodes node k reads)
    with the branches of each group cut apart where they weigh enough (``weight(k)``: node k's) or where
    two of them recur (``recurrent(k)``: node k runs its steps one after another); cut pieces get fresh
    ids, the rest keep theirs."""
    members: dict[int, list[int]] = {}
    for k, g in enumerate(group):
        members.setdefault(g, []).append(k)
    out = list(group)
    fresh = itertools.count(max(group, default=-1) + 1)
    for nodes in members.values():
        pieces = _pieces(nodes, preds, weight, recurrent)
        if len(pieces) < 2:
            continue
        for piece in pieces:
            number = next(fresh)
            for k in piece:
                out[k] = number
    return out


def _pieces(
    nodes: list[int],
    preds: Sequence[Sequence[int]],
    weight: Callable[[int], float],
    recurrent: Callable[[int], bool],
) -> list[list[int]]:
    """``nodes`` (one group, in topological order) as the pieces the cut makes, in order: ``[nodes]`` where
    no gap is cut."""
    if len(nodes) < 3:
        return [nodes]
    at = {k: i for i, k in enumerate(nodes)}
    inner = [[at[p] for p in preds[k] if p in at] for k in nodes]
    count = len(nodes)
    fed = {j for sources in inner for j in sources}
    cover = [0] * (count + 1)  # edges passing over each position, as differences

    def edge(j: int, i: int) -> None:  # j before i; -1 and count: a source and a sink before and after all
        if j + 1 < i:
            cover[j + 1] += 1
            cover[i] -= 1

    total = sum(weight(k) for k in nodes)
    side_in, side_out = _sides(nodes, inner, lambda k: weight(k) < MIN_SHARE * total and not recurrent(k))
    for i, sources in enumerate(inner):
        for j in sources:
            edge(j, i)
        if not sources and i not in side_in:  # starts a branch: from the group's start, over all before it
            edge(-1, i)
        if i not in fed and i not in side_out:  # ends one: to the group's end, over what comes after it
            edge(i, count)
    series, passing = [], 0
    for i in range(count):
        passing += cover[i]
        series.append(passing == 0)
    pieces: list[list[int]] = []
    trunk: list[int] = []
    links = UnionFind(count)  # the edges within each gap (weakly connected parts); gaps never share one
    i = 0
    while i < len(nodes):
        if series[i]:
            trunk.append(nodes[i])
            i += 1
            continue
        end = i
        while end < len(nodes) and not series[end]:
            end += 1
        gap = range(i, end)
        for k in gap:
            for j in inner[k]:
                if j in gap:
                    links.union(k, j)
        parts = links.groups(gap)
        heavy = sorted((sum(weight(nodes[p]) for p in part) for part in parts), reverse=True)
        recurring = sum(any(recurrent(nodes[p]) for p in part) for part in parts)
        if len(parts) > 1 and (heavy[1] >= MIN_SHARE * total or recurring > 1):
            if trunk:
                pieces.append(trunk)
                trunk = []
            pieces += [[nodes[p] for p in part] for part in parts]
        else:
            trunk += nodes[i:end]
        i = end
    if trunk:
        pieces.append(trunk)
    return pieces


def _sides(
    nodes: list[int], inner: Sequence[Sequence[int]], light: Callable[[int], bool]
) -> tuple[set[int], set[int]]:
    """The positions of ``nodes`` (``inner[i]``: the positions node i reads) that neither start nor end a
    branch. A node that reads nothing of the group starts one, unless it is ``light`` (too light to be a
    branch) and each node it feeds also reads one that reads the group: a side input, such as a state's
    Unsqueeze beside an LSTM's sequence, which would otherwise run beside everything before it. A node
    that feeds nothing of the group ends one, unless each node it reads also feeds one that feeds the
    group: a side output, such as an LSTM's final state beside its sequence."""
    readers: list[list[int]] = [[] for _ in nodes]
    for i, sources in enumerate(inner):
        for j in sources:
            readers[j].append(i)
    side_in = {
        i
        for i in range(len(nodes))
        if not inner[i]
        and readers[i]
        and light(nodes[i])
        and all(any(inner[j] for j in inner[r]) for r in readers[i])
    }
    side_out = {
        i
        for i in range(len(nodes))
        if not readers[i] and inner[i] and all(any(readers[r] for r in readers[j]) for j in inner[i])
    }
    return side_in, side_out
