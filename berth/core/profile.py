"""The demand to come, as the packer (:mod:`berth.core.placement`) sees it: a
:class:`Profile` of the pending requests, by size, CPU and RAM per GPU, and by which GPUs each
may use (``gpu_ids``, ``name``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable
from typing import Any

from berth.core.asks import Asks, roomy, tails
from berth.core.capacity import EPS, Capacity
from berth.core.request import Request
from berth.core.scarcity import Scarcity

SUPPLY_WEIGHTED = True  # False: FGD's plain NoAccess share (for comparison)
BY_COUNT = True  # False: the size distribution weighted by GPUs asked (before issue 32.4's w7)
CPU_BINDS = True  # False: CPU-only demand never counts in what a free GPU needs kept (before)

Access = tuple["frozenset[int] | None", "str | None"]  # allowed GPU indices, GPU-name filter


class Profile:
    """A distribution of demand: the share of GPU demand bigger than x (``p_size_above``), and
    whose CPU (RAM) ask exceeds x (``p_cpu_above``, ``p_ram_above``), by bisection.

    The size distribution is by job count, as FGD's popularity of its typical pods (a
    fragment matters by how many of the jobs to come cannot use it; ``BY_COUNT = False``: by
    GPUs asked, one 8-GPU job as much as eight 1-GPU jobs, which with the scarcity weight on
    top kept whole nodes for big jobs twice over and left more slivers: 0.2-0.3 point lower on
    openb's multigpu lists) -- unless some of the demand is restricted to some GPUs
    (``constrained``, below): then by GPUs asked, as before, since the scarcity weight is off
    there and by count nothing kept openb's G3 nodes for its 8-GPU 120-core pods (the
    first failed at 5.6% allocated on ``gpuspec10``, seed 42; best-fit's at 20.3%). The CPU
    and RAM asks (:meth:`p_stranded`) count by job too where the capacity's cores and RAM are
    roomy, else by GPUs asked, and a shape few nodes can host always by its GPUs
    (:mod:`berth.core.asks`). What a node must keep per free GPU
    (:meth:`per_gpu`) is what the GPU jobs bring per GPU, and where
    CPU binds (the demand brings more cores per GPU than the capacity has free per free
    GPU) the CPU-only jobs' share too (``CPU_BINDS``): then CPU-only work cannot all go to
    cores no GPU needs, and counting it sends it to the nodes richest in cores per GPU
    instead of the tightest fit on GPU nodes (openb ``cpu250``: +1.3 to +2.2 points).

    Demand may be restricted to some GPUs (a request's ``gpu_ids`` or ``name``: openb's GPU
    models). Then :meth:`at` (a GPU) and :meth:`on_node` give the part of the demand that may
    use those GPUs, still as shares of *all* demand, with ``no_access`` the share that may not
    (FGD's "NoAccess": free GPUs are fragmented for the demand that cannot use them). With
    ``SUPPLY_WEIGHTED`` each restricted demand's share counts divided by the share of the free
    GPU capacity it may use (measured when the profile is first used on a capacity table), so
    GPUs that scarce, much-wanted models offer are kept for the demand that needs them; then
    ``no_access`` may be negative. When no demand is restricted (``constrained`` is False)
    both return the profile itself and ``no_access`` is 0: decisions are as without models.
    """

    __slots__ = (
        "_asks",
        "_kept",
        "_kept_src",
        "_free_rows",
        "_groups",
        "_node_sub",
        "_pos_sub",
        "_roomy",
        "_size",
        "_size_tail",
        "_src",
        "_subs",
        "_reach",
        "_total",
        "constrained",
        "cpu_only_per_gpu",
        "cpu_per_gpu",
        "no_access",
        "ram_only_per_gpu",
        "ram_per_gpu",
        "scarce",
    )

    def __init__(
        self,
        demands: Iterable[tuple[float, float, float] | tuple[float, float, float, Access | None]],
        total: float | None = None,
        sub: bool = False,
    ) -> None:
        """``total``: the GPU demand the shares are of (a sub-profile's: all the demand's);
        ``sub``: a sub-profile of a constrained demand, whose sizes stay weighted by GPUs
        asked (see the class)."""
        rows: list[tuple[float, float, float]] = []
        self._free_rows: list[tuple[float, float, float]] = []
        self._groups: dict[Access, list[tuple[float, float, float]]] = {}
        alike: dict[tuple[float, float, float], tuple[float, float, float]] = {}
        for d in demands:
            row = (float(d[0]), float(d[1] or 0.0), float(d[2] or 0.0))
            row = alike.setdefault(row, row)  # (one tuple for jobs that ask alike)
            rows.append(row)
            acc = d[3] if len(d) > 3 else None
            if acc is None or acc == (None, None) or row[0] <= 0:
                self._free_rows.append(row)
            else:
                self._groups.setdefault(acc, []).append(row)
        gpu = sum(s for s, _, _ in rows if s > 0)
        if total is None:
            total = sum(s for s, _, _ in rows) or 1.0
        self._total = total
        by_count = BY_COUNT and not sub and not self._groups
        self.no_access = 1.0 - gpu / total if gpu else 0.0
        self.constrained = bool(self._groups)
        if not self.constrained:
            self._free_rows = []  # (only sub-profiles of a constrained demand read them)
        if by_count:
            self._size, self._size_tail = tails(sorted((s, 1.0) for s, _, _ in rows), len(rows))
        else:
            self._size, self._size_tail = tails(sorted((s, s) for s, _, _ in rows), total)
        self._asks = Asks(rows, total, by_count)  # (by job too where cores are roomy)
        # what one GPU of the demand to come brings along, on average (GPU-weighted): a node
        # whose CPU (RAM) left is below its free GPUs x this will strand the difference;
        # and the CPU-only demand's cores (RAM) per GPU of the demand (see per_gpu)
        self.cpu_per_gpu = sum(c for s, c, _ in rows if s > 0) / gpu if gpu else 0.0
        self.ram_per_gpu = sum(r for s, _, r in rows if s > 0) / gpu if gpu else 0.0
        self.cpu_only_per_gpu = sum(c for s, c, _ in rows if s <= 0) / gpu if gpu else 0.0
        self.ram_only_per_gpu = sum(r for s, _, r in rows if s <= 0) / gpu if gpu else 0.0
        self._kept: tuple[float, float] = (self.cpu_per_gpu, self.ram_per_gpu)
        self._kept_src: list[int] | None = None
        self._roomy = True
        # the multi-GPU shapes to come, weighed by how few nodes can still host each; not
        # with demand restricted to some GPUs, whose supply-weighted NoAccess term already
        # keeps scarce GPUs (the two together lost 1-2 points on openb's gpuspec lists)
        self.scarce = Scarcity([] if self._groups else rows, total)
        self._subs: dict[frozenset[Access], Profile] = {}
        self._reach: dict[Access, float] = {}
        self._src: list[int] | None = None  # the Capacity.index the caches below are for
        self._pos_sub: list[Profile | None] = []
        self._node_sub: list[Profile | None] = []

    @classmethod
    def of(cls, requests: Iterable[Request]) -> Profile:
        return cls(row for r in requests for row in _rows(r))

    @staticmethod
    def later(
        requests: list[Request] | Callable[[], list[Request]], constrained: bool | None = None
    ) -> Profile:
        """``Profile.of(requests)``, built when first asked (the same numbers, to the bit):
        a pass whose placements have no choice to make never pays for it. ``requests`` may
        be a function that lists them (called then: the caller sees that what it lists has
        not changed by then), and ``constrained`` known already (:func:`restricts` counted
        as the requests came and went), so that reading it lists nothing."""
        out = _Later(requests)
        if constrained is not None:
            out.constrained = constrained
        return out

    def restrictions(self) -> list[frozenset[int] | None]:
        """The ``gpu_ids`` of each restriction some of the demand has (None: by name only)."""
        return [ids for ids, _ in self._groups]

    def per_gpu(self, cap: Capacity) -> tuple[float, float]:
        """The cores and RAM a node of ``cap`` must keep per free GPU for the demand to come:
        what its GPU jobs bring per GPU, plus its CPU-only jobs' share where CPU (or RAM)
        binds: the demand brings more per GPU than ``cap`` has free per free GPU (measured
        when first asked for this capacity table), so CPU-only work will take cores next to
        free GPUs wherever it goes."""
        if self._kept_src is not cap.index:  # copies of a Capacity share their index list
            self._kept_src = cap.index
            cpu, ram = self._kept = (self.cpu_per_gpu, self.ram_per_gpu)
            more_cpu, more_ram = self.cpu_only_per_gpu, self.ram_only_per_gpu
            gpus = sum(f for f, ok in zip(cap.free, cap.usable, strict=True) if ok and f > 0)
            cores, mem = sum(cap.node_cpu), sum(cap.node_ram)
            if CPU_BINDS and (more_cpu > 0 or more_ram > 0):
                if gpus > 0 and (cores / gpus < cpu + more_cpu or mem / gpus < ram + more_ram):
                    self._kept = (cpu + more_cpu, ram + more_ram)
            self._roomy = roomy(gpus, cores, mem, cpu + more_cpu, ram + more_ram)
        return self._kept

    def p_size_above(self, x: float) -> float:
        return self._size_tail[bisect_right(self._size, x + EPS)]

    def p_stranded(self, cap: Capacity, cpu: float, ram: float) -> float:
        """Share of the demand that a node of ``cap`` with ``cpu``/``ram`` left could not take
        (treating CPU and RAM asks as independent): by job where ``cap``'s cores and RAM are
        roomy, else by GPUs asked (:mod:`berth.core.asks`)."""
        asks = self._asks
        if asks.by_job:
            self.per_gpu(cap)  # (measures whether cap is roomy)
            asks.bind(self._roomy, self.scarce.rare(cap))
        return asks.p_stranded(cpu, ram)

    def at(self, cap: Capacity, p: int) -> Profile:
        """The demand that may use GPU position ``p`` of ``cap``."""
        if not self._groups:
            return self
        self._bind(cap)
        sub = self._pos_sub[p]
        if sub is None:
            sub = self._pos_sub[p] = self._sub(self._mask(cap, p))
        return sub

    def on_node(self, cap: Capacity, n: int) -> Profile:
        """The demand that may use every GPU of node ``n`` of ``cap``."""
        if not self._groups:
            return self
        self._bind(cap)
        sub = self._node_sub[n]
        if sub is None:
            ps = cap.node_pos[n]
            mask = frozenset.intersection(*(self._mask(cap, p) for p in ps)) if ps else None
            sub = self._node_sub[n] = self._sub(mask)
        return sub

    def _bind(self, cap: Capacity) -> None:
        if self._src is not cap.index:  # copies of a Capacity share their index list
            self._src = cap.index
            self._pos_sub = [None] * len(cap.index)
            self._node_sub = [None] * len(cap.node_names)
            self._subs = {}
            free = sum(f for f, ok in zip(cap.free, cap.usable, strict=True) if ok and f > 0)
            self._reach = {a: _reach(a, cap) / free if free > 0 else 0.0 for a in self._groups}

    @staticmethod
    def _can(a: Access, cap: Capacity, p: int) -> bool:
        return (a[0] is None or cap.index[p] in a[0]) and (a[1] is None or a[1] in cap.names[p])

    def _mask(self, cap: Capacity, p: int) -> frozenset[Access]:
        return frozenset(a for a in self._groups if self._can(a, cap, p))

    def _sub(self, mask: frozenset[Access] | None) -> Profile:
        key = mask or frozenset()
        if len(key) == len(self._groups) and all(self._reach[a] >= 1.0 for a in key):
            return self  # the restrictions allow every free GPU: as if there were none
        sub = self._subs.get(key)
        if sub is None:
            rows = self._free_rows + [r for a in key for r in self._groups[a]]
            sub = self._subs[key] = Profile(rows, self._total, sub=True)
            if SUPPLY_WEIGHTED:
                wanted = sum(s for s, _, _ in self._free_rows if s > 0) / self._total
                for a in key:
                    if self._reach[a] > 0:
                        g = sum(s for s, _, _ in self._groups[a])
                        wanted += g / self._total / self._reach[a]
                sub.no_access = 1.0 - wanted
        return sub


class _Later(Profile):
    """A :class:`Profile` of ``requests`` (the caller's list, not to be changed) whose fields
    are filled at the first read of one."""

    __slots__ = ("_requests",)

    def __init__(
        self, requests: list[Request] | Callable[[], list[Request]]
    ) -> None:  # (Profile.__init__ runs later)
        self._requests = requests

    def __getattr__(self, name: str) -> Any:  # (only for a field not filled yet)
        try:
            requests = object.__getattribute__(self, "_requests")
        except AttributeError:
            raise AttributeError(name) from None
        if callable(requests):
            requests = self._requests = requests()
        if name == "constrained":  # (what a placement asks first: no need to build for it)
            self.constrained = any(restricts(r) for r in requests)
            return self.constrained
        del self._requests
        Profile.__init__(self, (row for r in requests for row in _rows(r)))
        return object.__getattribute__(self, name)


def _reach(a: Access, cap: Capacity) -> float:
    """The free GPU capacity of ``cap`` that demand restricted by ``a`` may use."""
    ids, name = a
    ps: Iterable[int] = (
        range(len(cap.index)) if ids is None else (cap.pos[i] for i in ids if i in cap.pos)
    )
    return sum(
        cap.free[p] for p in ps
        if cap.usable[p] and cap.free[p] > 0 and (name is None or name in cap.names[p])
    )  # fmt: skip


def _rows(r: Request) -> Iterable[tuple[float, float, float, Access | None]]:
    """A request's demand: one row; shares of several GPUs are that many shares of one (a
    share is what each of its GPUs must offer)."""
    cpu, ram, acc = r.cpu or 0.0, float(r.ram or 0), _access(r)
    if not r.shares:
        return ((r.gpu_amount, cpu, ram, acc),)
    k = r.count
    return ((r.each, cpu / k, ram / k, acc),) * k


def restricts(r: Request) -> bool:
    """Whether ``r`` is demand that only some GPUs may serve (a profile with any such is
    ``constrained``)."""
    return _access(r) is not None and _size(r) > 0


def _size(r: Request) -> float:
    """The size of a request's rows (:func:`_rows`), 0 if it has none."""
    if not r.shares:
        return float(r.gpu_amount)
    return float(r.each) if r.count else 0.0


def _access(r: Request) -> Access | None:
    if r.gpu_ids is None and not r.name:
        return None
    return (None if r.gpu_ids is None else frozenset(r.gpu_ids), r.name.lower() if r.name else None)
