"""Free capacity of every GPU (and node), built from the inventory and what holds it.

Internally GPUs are numbered by *position* in the inventory; ``Capacity.index[p]`` is the GPU
index that decisions name. Whole GPUs are exclusive (share 1.0); fractional holders add up to
at most 1.0 share and to at most the card's memory (invariant 1 of DESIGN.md).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from berth.core.inventory import Gpu, Node, Usage
from berth.core.states import Reason

EPS = 1e-9
INF = float("inf")


class Capacity:
    """Mutable free-capacity table. Cheap counters make impossible requests fail in O(1)."""

    __slots__ = (
        "busy",
        "free",
        "holders",
        "index",
        "mem_free",
        "mem_total",
        "n_whole_free",
        "names",
        "node_cpu",
        "node_names",
        "node_of",
        "node_pos",
        "node_ram",
        "node_whole",
        "paused",
        "pos",
        "static",
        "usable",
    )

    def __init__(
        self,
        inventory: Sequence[Gpu],
        nodes: Mapping[str, Node] | None = None,
        others: Mapping[int, Usage] | None = None,
        paused: Collection[int] = (),
    ) -> None:
        self.index = [g.index for g in inventory]
        self.pos = {g.index: p for p, g in enumerate(inventory)}
        self.names = [g.name.lower() for g in inventory]
        self.mem_total = [g.memory_total for g in inventory]
        self.mem_free = [
            INF if g.memory_total is None else float(g.memory_total) for g in inventory
        ]
        self.free = [1.0] * len(inventory)
        self.busy = [False] * len(inventory)
        paused_set = set(paused)
        self.paused = [g.index in paused_set for g in inventory]
        self.usable = [g.healthy and not pz for g, pz in zip(inventory, self.paused, strict=True)]
        self.holders: list[list[str]] = [[] for _ in inventory]
        node_ids: dict[str, int] = {}
        self.node_of: list[int] = []
        self.node_pos: list[list[int]] = []
        self.node_names: list[str] = []
        for p, g in enumerate(inventory):
            n = node_ids.get(g.node)
            if n is None:
                n = node_ids[g.node] = len(self.node_names)
                self.node_names.append(g.node)
                self.node_pos.append([])
            self.node_of.append(n)
            self.node_pos[n].append(p)
        nodes = nodes or {}
        self.node_cpu = [_resource(nodes.get(name), "cpu") for name in self.node_names]
        self.node_ram = [_resource(nodes.get(name), "ram") for name in self.node_names]
        for index, usage in (others or {}).items():
            if index not in self.pos:
                continue
            p = self.pos[index]
            self.free[p] -= usage.share
            self.mem_free[p] -= usage.mem
            self.busy[p] = self.busy[p] or usage.busy
            if usage.label:
                self.holders[p].append(usage.label)
        # per request key, why it can never run here (see schedule()): depends only on what
        # copies share (inventory, health, pauses), so copies share it too
        self.static: dict[tuple[object, ...], tuple[Reason, str] | None] = {}
        self.node_whole = [0] * len(self.node_names)
        self.n_whole_free = 0
        for p in range(len(self.index)):
            if self._whole_free(p):
                self.node_whole[self.node_of[p]] += 1
                self.n_whole_free += 1

    def _whole_free(self, p: int) -> bool:
        return self.usable[p] and self.free[p] >= 1.0 - EPS and not self.busy[p]

    def copy(self) -> Capacity:
        """A copy whose free capacity can change independently (holder labels are shared:
        change them only on the original)."""
        new = Capacity.__new__(Capacity)
        new.busy, new.holders, new.index, new.mem_total = (
            self.busy, self.holders, self.index, self.mem_total,
        )  # fmt: skip
        new.names, new.node_names, new.node_of, new.node_pos = (
            self.names, self.node_names, self.node_of, self.node_pos,
        )  # fmt: skip
        new.paused, new.pos, new.static, new.usable = (
            self.paused, self.pos, self.static, self.usable,
        )  # fmt: skip
        new.n_whole_free = self.n_whole_free
        new.free, new.mem_free, new.node_whole = self.free[:], self.mem_free[:], self.node_whole[:]
        new.node_cpu, new.node_ram = self.node_cpu[:], self.node_ram[:]
        return new

    def charge(self, p: int, share: float, mem: int | None) -> float:
        """Memory (bytes) a holder of ``share`` with declared ``mem`` is charged on GPU p."""
        if mem is not None:
            return float(mem)
        total = self.mem_total[p]
        if share >= 1.0 - EPS or total is None:
            return 0.0  # whole GPU: exclusive anyway
        return share * total

    def take(
        self,
        positions: Iterable[int],
        share: float,
        mem: int | None,
        node: int | None = None,
        cpu: float | None = None,
        ram: int | None = None,
        label: str = "",
        sign: float = 1.0,
    ) -> None:
        """Charge a holder (``sign=-1`` releases it)."""
        for p in positions:
            was = self._whole_free(p)
            self.free[p] -= sign * share
            self.mem_free[p] -= sign * self.charge(p, share, mem)
            now = self._whole_free(p)
            if was != now:
                d = 1 if now else -1
                self.n_whole_free += d
                self.node_whole[self.node_of[p]] += d
            if label:
                if sign > 0:
                    self.holders[p].append(label)
                elif label in self.holders[p]:
                    self.holders[p].remove(label)
        if node is not None:
            if cpu:
                self.node_cpu[node] -= sign * cpu
            if ram:
                self.node_ram[node] -= sign * ram

    def take_gpus(
        self, gpus: Sequence[int], share: float, mem: int | None, node: str | None = None,
        cpu: float | None = None, ram: int | None = None, label: str = "", sign: float = 1.0,
    ) -> None:  # fmt: skip
        """Like :meth:`take`, with GPU indices (a running job's attempt). Unknown GPUs are
        ignored (a GPU that vanished from the inventory)."""
        positions = [self.pos[g] for g in gpus if g in self.pos]
        n: int | None = None
        if positions:
            n = self.node_of[positions[0]]
        elif node is not None and node in self.node_names:
            n = self.node_names.index(node)
        self.take(positions, share, mem, n, cpu, ram, label, sign)

    def free_outside(self, reserved: Collection[int]) -> tuple[int, float, int, float]:
        """(whole GPUs free, largest free share) among usable GPUs not in ``reserved``, then
        the same among all usable GPUs: a job that fits in neither cannot start now."""
        whole, share, share_all = 0, 0.0, 0.0
        for p, f in enumerate(self.free):
            if not self.usable[p]:
                continue
            if f > share_all:
                share_all = f
            if p in reserved:
                continue
            if f >= 1.0 - EPS and not self.busy[p]:
                whole += 1
            if f > share:
                share = f
        return whole, share, self.n_whole_free, share_all

    def allocated(self) -> float:
        """GPUs allocated (sum of used shares, counting outside holders)."""
        return sum(1.0 - f for f in self.free)

    def who(self, p: int) -> str:
        """Who holds GPU p, for a pending reason (``"job 14"``, ``"claim by alice"``)."""
        h = self.holders[p]
        if h:
            return ", ".join(h[:3]) + (f" and {len(h) - 3} more" if len(h) > 3 else "")
        if self.paused[p]:
            return "paused"
        if not self.usable[p]:
            return "unhealthy"
        return ""


def _resource(node: Node | None, what: str) -> float:
    value = None if node is None else getattr(node, what)
    return INF if value is None else float(value)
