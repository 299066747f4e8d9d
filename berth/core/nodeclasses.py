"""Nodes in the same state, grouped, so that a placement scores each group once.

A placement (:func:`berth.core.placement.place`) scores every GPU (or node) that qualifies and
takes the lowest key; the key depends on what the node and the GPU offer (free share, busy,
memory, the node's CPU and RAM, its GPU models, which GPU restrictions it meets) and, last, on
the position (node) itself as the tie-break. Two nodes alike in all of that score alike GPU
for GPU, so only the lowest-numbered node of each group can win: :meth:`NodeClasses.nodes` lists
those, and the choice is the same as over every node. On openb's 1,213 nodes a few hundred
groups remain while the cluster fills (most nodes are pristine or full).

The caller keeps the groups true: :meth:`NodeClasses.moved` after every change to a node's free
capacity (``Capacity.take``), and :meth:`NodeClasses.learn` for each GPU restriction (a request's
``gpu_ids``) it places or profiles; :func:`place` falls back to every node for a restriction
the groups were not keyed by. Grouping needs each node's positions to be one run, numbered in
node order (as an inventory listed node by node gives): otherwise ``usable`` is False and
nothing is grouped.
"""

from __future__ import annotations

from bisect import insort

from berth.core.capacity import Capacity

_Key = tuple[object, ...]


class NodeClasses:
    """Classes of alike nodes of one :class:`Capacity`, kept as it changes."""

    __slots__ = ("_access", "_cap", "_group", "_groups", "_reps", "_static", "usable")

    def __init__(self, cap: Capacity) -> None:
        self._cap = cap
        self._access: dict[frozenset[int], int] = {}  # known restrictions -> their bit
        last = -1
        self.usable = True
        for ps in cap.node_pos:  # each node one run of positions, runs in node order
            if not ps or ps[0] != last + 1 or ps[-1] != ps[0] + len(ps) - 1:
                self.usable = False
            last = ps[-1] if ps else last
        self._static: list[_Key] = []
        self._group: list[_Key] = []
        self._groups: dict[_Key, list[int]] = {}
        self._reps: list[int] | None = None
        self._rekey()

    def knows(self, ids: frozenset[int]) -> bool:
        return ids in self._access

    def learn(self, ids: frozenset[int]) -> None:
        """Key the groups by whether each GPU is in ``ids`` too (a restriction to come)."""
        if ids not in self._access:
            self._access[ids] = len(self._access)
            self._rekey()

    def moved(self, n: int) -> None:
        """Node ``n``'s free capacity changed: move it to its group."""
        old, new = self._group[n], self._key(n)
        if old == new:
            return
        members = self._groups[old]
        members.remove(n)
        if not members:
            del self._groups[old]
        insort(self._groups.setdefault(new, []), n)
        self._group[n] = new
        self._reps = None

    def nodes(self) -> list[int]:
        """The lowest-numbered node of each group, in node order."""
        if self._reps is None:
            self._reps = sorted(ms[0] for ms in self._groups.values())
        return self._reps

    def __len__(self) -> int:
        return len(self._groups)

    def _rekey(self) -> None:
        cap = self._cap
        access = list(self._access.items())
        self._static = [tuple(self._gpu(p, access) for p in ps) for ps in cap.node_pos]
        self._groups = {}
        self._group = [self._key(n) for n in range(len(cap.node_pos))]
        for n, key in enumerate(self._group):
            self._groups.setdefault(key, []).append(n)
        self._reps = None

    def _gpu(self, p: int, access: list[tuple[frozenset[int], int]]) -> _Key:
        """What never changes of GPU ``p``: its model, memory, health, the restrictions it meets."""
        cap = self._cap
        bits = sum(1 << b for ids, b in access if cap.index[p] in ids)
        return (cap.names[p], cap.mem_total[p], cap.usable[p], bits)

    def _key(self, n: int) -> _Key:
        cap = self._cap
        ps = cap.node_pos[n]
        lo, hi = ps[0], ps[-1] + 1
        return (
            self._static[n],
            tuple(cap.free[lo:hi]),
            tuple(cap.mem_free[lo:hi]),
            tuple(cap.busy[lo:hi]),
            cap.node_cpu[n],
            cap.node_ram[n],
        )
