"""Disjoint sets of the numbers 0..n-1 (union-find): the connected parts of a graph's nodes, for
partition, forks and probes."""

from __future__ import annotations

from collections.abc import Iterable


class UnionFind:
    """Disjoint sets of 0..n-1, each at first on its own; a set is named by its least member."""

    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        """The name of ``i``'s set (paths to it shortened on the way)."""
        root = i
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[i] != root:
            self.parent[i], i = root, self.parent[i]
        return root

    def union(self, a: int, b: int) -> None:
        """The sets of ``a`` and ``b`` made one."""
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def groups(self, members: Iterable[int]) -> list[list[int]]:
        """``members`` by set, each set in the order given, the sets in the order of their first member."""
        out: dict[int, list[int]] = {}
        for i in members:
            out.setdefault(self.find(i), []).append(i)
        return list(out.values())
