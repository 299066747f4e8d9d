"""Capabilities that few nodes still have, and what breaking one costs the packer.

A *capability* is what one multi-GPU shape of the demand to come needs of a node: ``k`` whole
free GPUs together with the CPU and RAM the shape asks (openb's 8-GPU 120-core pods fit only
the G3 nodes; an 8-GPU 64-core pod fits any pristine 8-GPU node). The packer's other terms
see the GPU sizes and the CPU/RAM asks of the demand apart, and as shares of *all* demand, so a
capability that 3% of the nodes offer looks worth as little as one that half of them offer:
other pods took every G3 GPU long before the cluster was full, and the first 120-core pod
failed at a third of the GPUs allocated.

Here a shape's share of the GPU demand counts ``F / F_t - 1`` times over, where ``F`` is the
free GPU capacity and ``F_t`` the part of it on nodes that can still host the shape (measured
when the capacity table is first seen, as :class:`berth.core.profile.Profile`'s reach is;
``BY_GPUS = False``: counted in nodes, as before, which weighed a 2-GPU node as much as an
8-GPU one and was 0.1-0.3 point lower on openb's multi-GPU lists): a placement
that takes away a node's last capability for a shape raises the expected fragmentation by
that weight times the node's GPU share left free (which the shape can no longer use there).
A capability every node still has weighs nothing, so with a single node (the daemon's host)
or with only small pods to come, decisions are as without this term.
"""

from __future__ import annotations

from berth.core.capacity import EPS, Capacity

WEIGHTED = True  # False: no weight on scarce capabilities (the packer before, for comparison)
BY_GPUS = True  # False: hosts counted as nodes, not as the free GPUs on them (before)
RARE = 2.0  # a shape is rare when its hosts hold under 1/RARE of the free GPUs (see rare())

Shape = tuple[int, float, float]  # whole GPUs, CPU, RAM that one pod of the shape asks


class Scarcity:
    """The multi-GPU shapes of a demand (each with its share of the GPU demand) and, once
    bound to a capacity table, each shape's weight by how few nodes can still host it."""

    __slots__ = ("_kmin", "_rare", "_shapes", "_shares", "_src", "_weights")

    def __init__(self, rows: list[tuple[float, float, float]], total: float) -> None:
        share: dict[Shape, float] = {}
        for s, cpu, ram in rows:
            if s >= 2.0 - EPS and abs(s - round(s)) < EPS:
                key = (round(s), cpu, ram)
                share[key] = share.get(key, 0.0) + s / total
        self._shapes = sorted(share)
        self._shares = [share[t] for t in self._shapes]
        self._kmin = min((t[0] for t in self._shapes), default=0)
        self._weights: list[float] = []
        self._rare: frozenset[Shape] = frozenset()
        self._src: list[int] | None = None

    def __bool__(self) -> bool:
        return WEIGHTED and bool(self._shapes)

    def recount(self) -> None:
        """Count the hosts again at the next use (the capacity table changed since)."""
        self._src = None

    def _bind(self, cap: Capacity) -> None:
        if self._src is cap.index:  # copies of a Capacity share their index list
            return
        self._src = cap.index
        free = [sum(cap.free[p] for p in ps if cap.usable[p]) for ps in cap.node_pos]
        total = sum(free)
        self._weights = []
        rare = []
        for (k, cpu, ram), share in zip(self._shapes, self._shares, strict=True):
            on = [
                n
                for n, f in enumerate(free)
                if cap.node_pos[n] and _hosts(cap, n, k, cpu, ram, 0, 0.0, 0.0)
            ]
            gpus = sum(free[n] for n in on)
            hosts = gpus if BY_GPUS else float(len(on))
            whole = total if BY_GPUS else sum(1.0 for ps in cap.node_pos if ps)
            self._weights.append(share * (whole / hosts - 1.0) if hosts > EPS else 0.0)
            if gpus * RARE < total:
                rare.append((k, cpu, ram))
        self._rare = frozenset(rare)

    def rare(self, cap: Capacity) -> frozenset[Shape]:
        """The shapes whose hosts on ``cap`` hold under ``1 / RARE`` of its free GPUs (one
        object until the hosts are counted again): :mod:`berth.core.asks` keeps their CPU and
        RAM asks weighted by the GPUs they ask."""
        if not self._shapes:
            return self._rare
        self._bind(cap)
        return self._rare

    def delta(
        self, cap: Capacity, n: int, whole: int, cpu: float, ram: float, gpus: float
    ) -> float:
        """The rise of expected fragmentation when a request takes ``whole`` whole GPUs (of
        ``gpus`` GPU share), ``cpu`` and ``ram`` from node ``n``: the weight of every shape
        the node could host before and not after, times the GPU share it keeps free."""
        if not self or cap.node_whole[n] < self._kmin:
            return 0.0
        self._bind(cap)
        lost = 0.0
        for (k, kc, kr), w in zip(self._shapes, self._weights, strict=True):
            if w and _hosts(cap, n, k, kc, kr, 0, 0.0, 0.0):
                if not _hosts(cap, n, k, kc, kr, whole, cpu, ram):
                    lost += w
        if not lost:
            return 0.0
        left = sum(cap.free[q] for q in cap.node_pos[n]) - gpus
        return lost * left if left > EPS else 0.0


def _hosts(
    cap: Capacity, n: int, k: int, cpu: float, ram: float, whole: int, use_cpu: float,
    use_ram: float,
) -> bool:  # fmt: skip
    """Whether node ``n``, less ``whole`` whole GPUs, ``use_cpu`` and ``use_ram``, can host a
    pod of ``k`` whole GPUs with ``cpu`` and ``ram``."""
    return (
        cap.node_whole[n] - whole >= k
        and cap.node_cpu[n] - use_cpu >= cpu - EPS
        and cap.node_ram[n] - use_ram >= ram - EPS
    )
