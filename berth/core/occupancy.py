"""What the running jobs hold, kept across passes instead of rebuilt for each one.

``schedule()`` builds a :class:`~berth.core.capacity.Capacity` from the inventory and charges
every running job to it, every pass. A caller that knows when jobs start and end (the
simulator: one pass per event, tens of thousands of events) can keep an :class:`Occupancy`
instead, and hand ``schedule(..., capacity=occ.capacity())`` a copy of it: the pass then
charges nothing.

The figures are bit for bit those of the fresh build (so decisions are identical): the fresh
build subtracts the running jobs' shares, memory and node CPU/RAM in the order of ``running``
(start order). A start subtracts its job last, as the fresh build would; an end recomputes the
GPUs and node its job held from the empty capacity and the remaining holders, in start order
(adding back would round differently with fractional shares).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from berth.core.capacity import Capacity
from berth.core.inventory import Gpu, Node, Usage
from berth.core.job import Job


class Occupancy:
    """Capacity left by the running jobs, updated by :meth:`start` and :meth:`end`."""

    __slots__ = ("base", "cap", "jobs", "on_gpu", "on_node")

    def __init__(
        self,
        inventory: Sequence[Gpu],
        nodes: Mapping[str, Node] | None = None,
        others: Mapping[int, Usage] | None = None,
        paused: Collection[int] = (),
    ) -> None:
        self.base = Capacity(inventory, nodes, others, paused)  # nothing of ours held
        self.cap = self.base.copy()
        # per GPU position / node: holder job id -> what it is charged, in start order
        self.on_gpu: list[dict[int, tuple[float, float]]] = [{} for _ in self.base.index]
        self.on_node: list[dict[int, tuple[float, float]]] = [{} for _ in self.base.node_names]
        self.jobs: dict[int, tuple[list[int], int | None]] = {}  # id -> (positions, node)

    def capacity(self) -> Capacity:
        """A copy to schedule on (the pass changes it; this stays as it is). Its ``index`` is
        a list of its own, as a fresh build's would be: the packer's profile measures supply
        once per pass, on the first capacity with a new ``index`` it sees."""
        cap = self.cap.copy()
        cap.index = list(cap.index)
        return cap

    def start(self, job: Job) -> None:
        """Charge ``job``'s current attempt (it just started)."""
        a = job.attempt
        if a is None or job.id in self.jobs:
            return
        cap, req = self.cap, job.request
        positions = [cap.pos[g] for g in a.gpus if g in cap.pos]
        n: int | None = None
        if positions:
            n = cap.node_of[positions[0]]
        elif a.node in cap.node_names:
            n = cap.node_names.index(a.node)
        cap.take(positions, a.share, a.mem, n, req.cpu, req.ram)
        for p in positions:
            self.on_gpu[p][job.id] = (a.share, cap.charge(p, a.share, a.mem))
        if n is not None and (req.cpu or req.ram):
            self.on_node[n][job.id] = (req.cpu or 0.0, float(req.ram or 0))
        self.jobs[job.id] = (positions, n)

    def end(self, job: Job) -> None:
        """Release ``job`` (its attempt ended)."""
        held = self.jobs.pop(job.id, None)
        if held is None:
            return
        positions, n = held
        cap, base = self.cap, self.base
        for p in positions:
            del self.on_gpu[p][job.id]
            was = cap._whole_free(p)
            free, mem = base.free[p], base.mem_free[p]
            for share, charge in self.on_gpu[p].values():
                free -= share
                mem -= charge
            cap.free[p], cap.mem_free[p] = free, mem
            now = cap._whole_free(p)
            if was != now:
                d = 1 if now else -1
                cap.n_whole_free += d
                cap.node_whole[cap.node_of[p]] += d
        if n is not None and self.on_node[n].pop(job.id, None) is not None:
            cpu, ram = base.node_cpu[n], base.node_ram[n]
            for c, r in self.on_node[n].values():
                if c:
                    cpu -= c
                if r:
                    ram -= r
            cap.node_cpu[n], cap.node_ram[n] = cpu, ram
