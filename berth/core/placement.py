"""Where a request goes: first-fit, best-fit, or the fragmentation-aware packer.

All three respect the same hard rules (healthy, not paused, allowed GPUs, name filter, share,
memory, node CPU/RAM; a job's GPUs on one node unless it needs more than any node has), and
put ``prefer``-red GPUs first. They differ in which qualifying GPU (or node) they pick:

- ``first-fit``: the lowest index.
- ``best-fit``: the tightest fit: the partly used GPU (or the node) left with the least free.
- ``packer``: FGD's idea (ATC'23, "fragmentation gradient descent"): pick the placement that
  raises the *expected fragmentation* least, where fragmentation of a GPU/node is the free
  capacity that the demand to come could not use. FGD takes the demand from a fixed historical
  workload; berth's :class:`Profile` is built from the live queue (or a trace's recent
  arrivals) by the caller, ties go to the tightest fit, and node CPU/RAM that would strand free
  GPUs counts as fragmentation too, two ways: the next pod's CPU/RAM ask may not fit (FGD's
  view), and *in aggregate* the node must keep the CPU/RAM its free GPUs will need (free GPUs
  x the demand's cores (RAM) per GPU): CPU-only and CPU-heavy work goes to roomy nodes or to
  nodes whose GPUs are all taken, not to GPU-rich nodes with just enough CPU for their GPUs.
  Demand restricted to some GPUs (``gpu_ids``, ``name``: GPU models) counts only where it may
  run, and free GPUs count as fragmented for the demand that may not use them (FGD's
  NoAccess), weighed by supply: see :class:`Profile`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from berth.core.capacity import EPS, INF, Capacity
from berth.core.job import Request

PLACEMENTS = ("first-fit", "best-fit", "packer")
SUPPLY_WEIGHTED = True  # False: FGD's plain NoAccess share (for comparison)


@dataclass(frozen=True, slots=True)
class Placement:
    positions: tuple[int, ...]
    node: int
    mem: int | None  # GPU memory charged per GPU (bytes)


Access = tuple["frozenset[int] | None", "str | None"]  # allowed GPU indices, GPU-name filter


class Profile:
    """A distribution of demand: the share of GPU demand bigger than x (``p_size_above``), and
    whose CPU (RAM) ask exceeds x (``p_cpu_above``, ``p_ram_above``), by bisection.

    Weighted by GPUs asked, not by job count: a fragment matters by how much of the *GPU
    demand* to come cannot use it (one 8-GPU job weighs as much as eight 1-GPU jobs).

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
        "_cpu",
        "_cpu_tail",
        "_free_rows",
        "_groups",
        "_node_sub",
        "_pos_sub",
        "_ram",
        "_ram_tail",
        "_size",
        "_size_tail",
        "_src",
        "_subs",
        "_reach",
        "_total",
        "constrained",
        "cpu_per_gpu",
        "no_access",
        "ram_per_gpu",
    )

    def __init__(
        self,
        demands: Iterable[tuple[float, float, float] | tuple[float, float, float, Access | None]],
        total: float | None = None,
    ) -> None:
        rows: list[tuple[float, float, float]] = []
        self._free_rows: list[tuple[float, float, float]] = []
        self._groups: dict[Access, list[tuple[float, float, float]]] = {}
        for d in demands:
            row = (float(d[0]), float(d[1] or 0.0), float(d[2] or 0.0))
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
        self.no_access = 1.0 - gpu / total if gpu else 0.0
        self.constrained = bool(self._groups)
        self._size, self._size_tail = _tail(sorted((s, s) for s, _, _ in rows), total)
        self._cpu, self._cpu_tail = _tail(sorted((c, s) for s, c, _ in rows if s > 0), total)
        self._ram, self._ram_tail = _tail(sorted((r, s) for s, _, r in rows if s > 0), total)
        # what one GPU of the demand to come brings along, on average (GPU-weighted): a node
        # whose CPU (RAM) left is below its free GPUs x this will strand the difference
        self.cpu_per_gpu = sum(c for s, c, _ in rows if s > 0) / gpu if gpu else 0.0
        self.ram_per_gpu = sum(r for s, _, r in rows if s > 0) / gpu if gpu else 0.0
        self._subs: dict[frozenset[Access], Profile] = {}
        self._reach: dict[Access, float] = {}
        self._src: list[int] | None = None  # the Capacity.index the caches below are for
        self._pos_sub: list[Profile | None] = []
        self._node_sub: list[Profile | None] = []

    @classmethod
    def of(cls, requests: Iterable[Request]) -> Profile:
        return cls((r.gpu_amount, r.cpu or 0.0, float(r.ram or 0), _access(r)) for r in requests)

    def p_size_above(self, x: float) -> float:
        return self._size_tail[bisect_right(self._size, x + EPS)]

    def p_stranded(self, cpu: float, ram: float) -> float:
        """Share of GPU demand that a node with ``cpu``/``ram`` left could not take
        (treating CPU and RAM asks as independent)."""
        pc = self._cpu_tail[bisect_right(self._cpu, cpu + EPS)] if cpu < INF else 0.0
        pr = self._ram_tail[bisect_right(self._ram, ram + EPS)] if ram < INF else 0.0
        return 1.0 - (1.0 - pc) * (1.0 - pr)

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
            sub = self._subs[key] = Profile(rows, self._total)
            if SUPPLY_WEIGHTED:
                wanted = sum(s for s, _, _ in self._free_rows if s > 0) / self._total
                for a in key:
                    if self._reach[a] > 0:
                        g = sum(s for s, _, _ in self._groups[a])
                        wanted += g / self._total / self._reach[a]
                sub.no_access = 1.0 - wanted
        return sub


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


def _access(r: Request) -> Access | None:
    if r.gpu_ids is None and not r.name:
        return None
    return (None if r.gpu_ids is None else frozenset(r.gpu_ids), r.name.lower() if r.name else None)


def _tail(pairs: list[tuple[float, float]], total: float) -> tuple[list[float], list[float]]:
    """Sorted (key, weight) -> keys, and the total weight (share) of the keys from each on."""
    keys = [k for k, _ in pairs]
    tail = [0.0] * (len(pairs) + 1)
    for i in range(len(pairs) - 1, -1, -1):
        w = pairs[i][1]
        tail[i] = tail[i + 1] + w / total
    return keys, tail


def place(
    cap: Capacity,
    req: Request,
    how: str = "best-fit",
    profile: Profile | None = None,
    exclude: Collection[int] = (),
) -> Placement | None:
    """A placement for ``req`` on ``cap`` (positions not in ``exclude``), or None."""
    k = req.count
    if k == 0:
        n = _pick_node(cap, req, how, profile, list(range(len(cap.node_names))), 0)
        return None if n is None else Placement((), n, None)
    allowed = None if req.gpu_ids is None else {cap.pos[i] for i in req.gpu_ids if i in cap.pos}
    name = req.name.lower() if req.name else None
    prefer = {cap.pos[i] for i in req.prefer if i in cap.pos}
    if req.whole:
        return _place_whole(cap, req, k, how, profile, exclude, allowed, name, prefer)
    return _place_share(cap, req, how, profile, exclude, allowed, name, prefer)


def _node_ok(cap: Capacity, n: int, req: Request) -> bool:
    return (not req.cpu or cap.node_cpu[n] >= req.cpu - EPS) and (
        not req.ram or cap.node_ram[n] >= req.ram
    )


def _place_whole(
    cap: Capacity, req: Request, k: int, how: str, profile: Profile | None,
    exclude: Collection[int], allowed: set[int] | None, name: str | None, prefer: set[int],
) -> Placement | None:  # fmt: skip
    if k > cap.n_whole_free:
        return None
    need_mem = -INF if req.mem is None else float(req.mem)
    span = all(len(ps) < k for ps in cap.node_pos)  # bigger than any node: spread over nodes
    feasible: list[tuple[int, list[int]]] = []
    for n, ps in enumerate(cap.node_pos):
        if (cap.node_whole[n] < k and not span) or cap.node_whole[n] == 0:
            continue
        if not _node_ok(cap, n, req):
            continue
        cands = [
            p for p in ps
            if cap.usable[p] and cap.free[p] >= 1.0 - EPS and not cap.busy[p]
            and cap.mem_free[p] >= need_mem
            and (allowed is None or p in allowed) and (name is None or name in cap.names[p])
            and p not in exclude
        ]  # fmt: skip
        if len(cands) >= k or (span and cands):
            feasible.append((n, cands))
    if not feasible:
        return None
    if span:  # fullest-free nodes first, so the job touches as few nodes as possible
        feasible.sort(key=lambda nc: (-len(nc[1]), nc[0]))
        chosen: list[int] = []
        for _, cands in feasible:
            chosen.extend(cands[: k - len(chosen)])
            if len(chosen) == k:
                return Placement(tuple(chosen), cap.node_of[chosen[0]], req.mem)
        return None

    def score(nc: tuple[int, list[int]]) -> tuple[float, ...]:
        n, cands = nc
        pref = -sum(1 for p in cands if p in prefer)
        if how == "first-fit":
            return (pref, 0.0, n)
        tight = float(len(cands))
        if how == "packer" and profile is not None:
            c = cap.node_whole[n]
            pn = profile.on_node(cap, n)
            d = _whole_waste(pn, c - k) - _whole_waste(pn, c) - k * pn.no_access
            d += _node_delta(cap, pn, n, req, float(k))
            return (pref, round(d, 9), tight, n)
        return (pref, tight, n)

    n, cands = min(feasible, key=score)
    if how == "packer" and profile is not None and profile.constrained:
        # within a node, first the GPUs that the least of the demand to come may use
        cands.sort(key=lambda p: (p not in prefer, -profile.at(cap, p).no_access, p))
    else:
        cands.sort(key=lambda p: (p not in prefer, p))
    return Placement(tuple(cands[:k]), n, req.mem)


def _place_share(
    cap: Capacity, req: Request, how: str, profile: Profile | None,
    exclude: Collection[int], allowed: set[int] | None, name: str | None, prefer: set[int],
) -> Placement | None:  # fmt: skip
    s = req.share
    best: tuple[float, ...] | None = None
    best_p = -1
    best_mem = 0.0
    node_free: dict[int, float] = {}
    positions: Iterable[int] = range(len(cap.index)) if allowed is None else sorted(allowed)
    for p in positions:
        f = cap.free[p]
        if f < s - EPS or not cap.usable[p] or p in exclude:
            continue
        charge = cap.charge(p, s, req.mem)
        if cap.mem_free[p] < charge or (name is not None and name not in cap.names[p]):
            continue
        n = cap.node_of[p]
        if not _node_ok(cap, n, req):
            continue
        pref = 0.0 if p in prefer else 1.0
        if how == "first-fit":
            key: tuple[float, ...] = (pref, p)
        elif how == "packer" and profile is not None:
            whole = f >= 1.0 - EPS and not cap.busy[p]
            pg = pn = profile
            if profile.constrained:  # the demand that may use this GPU (node), FGD's NoAccess
                pg, pn = profile.at(cap, p), profile.on_node(cap, n)
            d = _part_waste(pg, f - s) - (0.0 if whole else _part_waste(pg, f))
            d -= s * pg.no_access
            if whole:
                c = cap.node_whole[n]
                d += _whole_waste(pn, c - 1) - _whole_waste(pn, c)
            if req.cpu or req.ram:
                if n not in node_free:
                    node_free[n] = sum(cap.free[q] for q in cap.node_pos[n])
                d += _node_delta(cap, pn, n, req, s, node_free[n])
            key = (pref, round(d, 9), f - s, p)
        else:
            key = (pref, f - s, p)
        if best is None or key < best:
            best, best_p, best_mem = key, p, charge
            if how == "first-fit" and pref == 0.0:
                break
    if best is None:
        return None
    mem = req.mem if req.mem is not None or cap.mem_total[best_p] is None else int(best_mem)
    return Placement((best_p,), cap.node_of[best_p], mem)


def _pick_node(
    cap: Capacity, req: Request, how: str, profile: Profile | None, nodes: list[int], k: int
) -> int | None:
    best: tuple[float, ...] | None = None
    best_n = None
    for n in nodes:
        if not _node_ok(cap, n, req):
            continue
        left = cap.node_cpu[n] - (req.cpu or 0.0)
        if how == "first-fit":
            return n
        if how == "packer" and profile is not None:
            pn = profile.on_node(cap, n)
            key: tuple[float, ...] = (_node_delta(cap, pn, n, req, 0.0), left, n)
        else:
            key = (left, n)
        if best is None or key < best:
            best, best_n = key, n
    return best_n


def _part_waste(profile: Profile, f: float) -> float:
    """Expected unusable share of a partly free GPU: f x P(next demand > f)."""
    if f <= EPS:
        return 0.0
    return f * profile.p_size_above(f)


def _whole_waste(profile: Profile, c: int) -> float:
    """Expected unusable whole GPUs of a node with c free: c x P(next demand > c)."""
    return 0.0 if c <= 0 else c * profile.p_size_above(float(c))


def _node_delta(
    cap: Capacity, profile: Profile, n: int, req: Request, gpus: float,
    node_free: float | None = None,
) -> float:  # fmt: skip
    """Change of the free GPU share stranded because the node's CPU or RAM runs out."""
    cpu, ram = req.cpu or 0.0, float(req.ram or 0)
    before_cpu, before_ram = cap.node_cpu[n], cap.node_ram[n]
    if (not cpu or before_cpu == INF) and (not ram or before_ram == INF):
        return 0.0
    if node_free is None:
        node_free = sum(cap.free[q] for q in cap.node_pos[n])
    before = node_free * profile.p_stranded(before_cpu, before_ram)
    after = (node_free - gpus) * profile.p_stranded(before_cpu - cpu, before_ram - ram)
    short = _short(profile, node_free - gpus, before_cpu - cpu, before_ram - ram)
    return after - before + short - _short(profile, node_free, before_cpu, before_ram)


def _short(profile: Profile, free: float, cpu: float, ram: float) -> float:
    """Free GPUs the node cannot feed: the demand to come brings ``cpu_per_gpu`` cores (and
    ``ram_per_gpu`` RAM) per GPU, so a node with less CPU (RAM) left than that strands the rest
    *in aggregate*, however small each next pod is."""
    short = 0.0
    if cpu < INF and profile.cpu_per_gpu > 0:
        short = free - cpu / profile.cpu_per_gpu
    if ram < INF and profile.ram_per_gpu > 0:
        short = max(short, free - ram / profile.ram_per_gpu)
    return short if short > 0.0 else 0.0
