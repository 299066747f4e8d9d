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

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from berth.core.capacity import EPS, INF, Capacity
from berth.core.nodeclasses import NodeClasses
from berth.core.profile import Profile
from berth.core.request import Request

PLACEMENTS = ("first-fit", "best-fit", "packer")
__all__ = ["PLACEMENTS", "Placement", "Profile", "could_fit", "place"]


@dataclass(frozen=True, slots=True)
class Placement:
    positions: tuple[int, ...]
    node: int
    mem: int | None  # GPU memory charged per GPU (bytes)


def place(
    cap: Capacity,
    req: Request,
    how: str = "best-fit",
    profile: Profile | None = None,
    exclude: Collection[int] = (),
    classes: NodeClasses | None = None,
) -> Placement | None:
    """A placement for ``req`` on ``cap`` (positions not in ``exclude``), or None.

    ``classes`` (kept true to ``cap`` by the caller) lets it score one node of each class of
    alike nodes instead of every node: the same placement, found sooner."""
    k = req.count
    nodes = None if classes is None else _class_nodes(classes, req, profile, exclude)
    if k == 0:
        every = list(range(len(cap.node_names))) if nodes is None else nodes
        n = _pick_node(cap, req, how, profile, every, 0)
        return None if n is None else Placement((), n, None)
    allowed = None if req.gpu_ids is None else {cap.pos[i] for i in req.gpu_ids if i in cap.pos}
    name = req.name.lower() if req.name else None
    prefer = {cap.pos[i] for i in req.prefer if i in cap.pos}
    if req.whole:
        return _place_whole(cap, req, k, how, profile, exclude, allowed, name, prefer, nodes)
    if req.shares:
        return _place_shares(cap, req, k, how, profile, exclude, allowed, name, prefer)
    return _place_share(cap, req, how, profile, exclude, allowed, name, prefer, nodes)


def _class_nodes(
    classes: NodeClasses, req: Request, profile: Profile | None, exclude: Collection[int]
) -> list[int] | None:
    """The nodes to score for ``req``: one of each class, or None (every node) when the
    classes may not tell apart what the request or the profile looks at."""
    if not classes.usable or exclude or req.prefer or req.name or req.shares:
        return None
    if req.gpu_ids is not None and not classes.knows(frozenset(req.gpu_ids)):
        return None
    if profile is not None and profile.constrained:
        if any(ids is not None and not classes.knows(ids) for ids in profile.restrictions()):
            return None
    return classes.nodes()


def could_fit(cap: Capacity, req: Request) -> bool:
    """False when :func:`place` is sure to find nothing for ``req`` on ``cap`` from the
    counts alone (too few whole GPUs free on any node, or across nodes for a job bigger than
    a node; no GPU with the share free); True means "try"."""
    g = req.gpus
    if g >= 1:
        k = int(g)
        if k > cap.n_whole_free:
            return False
        span = all(len(ps) < k for ps in cap.node_pos)  # (as _place_whole says)
        return span or max(cap.node_whole) >= k
    if g <= 0:
        return True
    s = g - EPS
    return any(f >= s and u for f, u in zip(cap.free, cap.usable, strict=True))


def _node_ok(cap: Capacity, n: int, req: Request) -> bool:
    return (not req.cpu or cap.node_cpu[n] >= req.cpu - EPS) and (
        not req.ram or cap.node_ram[n] >= req.ram
    )


def _place_whole(
    cap: Capacity, req: Request, k: int, how: str, profile: Profile | None,
    exclude: Collection[int], allowed: set[int] | None, name: str | None, prefer: set[int],
    nodes: list[int] | None = None,
) -> Placement | None:  # fmt: skip
    if k > cap.n_whole_free:
        return None
    need_mem = -INF if req.mem is None else float(req.mem)
    span = all(len(ps) < k for ps in cap.node_pos)  # bigger than any node: spread over nodes
    feasible: list[tuple[int, list[int]]] = []
    for n in range(len(cap.node_pos)) if nodes is None or span else nodes:
        ps = cap.node_pos[n]
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
            d += profile.scarce.delta(cap, n, k, req.cpu or 0.0, float(req.ram or 0), float(k))
            return (pref, round(d, 9), tight, n)
        return (pref, tight, n)

    # (one node to choose, one GPU to order: no score, so the packer's profile is not read)
    n, cands = feasible[0] if len(feasible) == 1 else min(feasible, key=score)
    if len(cands) > 1 and how == "packer" and profile is not None and profile.constrained:
        # within a node, first the GPUs that the least of the demand to come may use
        cands.sort(key=lambda p: (p not in prefer, -profile.at(cap, p).no_access, p))
    else:
        cands.sort(key=lambda p: (p not in prefer, p))
    return Placement(tuple(cands[:k]), n, req.mem)


def _place_share(
    cap: Capacity, req: Request, how: str, profile: Profile | None,
    exclude: Collection[int], allowed: set[int] | None, name: str | None, prefer: set[int],
    nodes: list[int] | None = None,
) -> Placement | None:  # fmt: skip
    best: tuple[float, ...] | None = None
    best_p = -1
    best_mem = 0.0
    node_free: dict[int, float] = {}
    for p, key, charge in _share_keys(cap, req, how, profile, exclude, allowed, name, prefer,
                                      node_free, nodes):  # fmt: skip
        if best is None or key < best:
            best, best_p, best_mem = key, p, charge
            if how == "first-fit" and key[0] == 0.0:
                break
    if best is None:
        return None
    mem = req.mem if req.mem is not None or cap.mem_total[best_p] is None else int(best_mem)
    return Placement((best_p,), cap.node_of[best_p], mem)


def _share_keys(
    cap: Capacity, req: Request, how: str, profile: Profile | None, exclude: Collection[int],
    allowed: set[int] | None, name: str | None, prefer: set[int], node_free: dict[int, float],
    nodes: list[int] | None = None,
) -> Iterable[tuple[int, tuple[float, ...], float]]:  # fmt: skip
    """(position, key, memory charged) of every GPU where a share ``req.share`` fits (on
    ``nodes``, if given), lowest key best: the preferred GPUs first, then by ``how`` (the
    packer: the rise of expected fragmentation; best-fit: the least left free; first-fit:
    the lowest index)."""
    s = req.share
    scarce: dict[tuple[int, bool], float] = {}
    positions: Iterable[int] = range(len(cap.index)) if allowed is None else sorted(allowed)
    if nodes is not None:
        positions = [p for n in nodes for p in cap.node_pos[n] if allowed is None or p in allowed]
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
            if profile.scarce:  # (the same for every GPU of a node that is alike: once)
                lost = scarce.get((n, whole))
                if lost is None:
                    lost = scarce[n, whole] = profile.scarce.delta(
                        cap, n, int(whole), req.cpu or 0.0, float(req.ram or 0), s
                    )
                d += lost
            key = (pref, round(d, 9), f - s, p)
        else:
            key = (pref, f - s, p)
        yield p, key, charge


def _place_shares(
    cap: Capacity, req: Request, k: int, how: str, profile: Profile | None,
    exclude: Collection[int], allowed: set[int] | None, name: str | None, prefer: set[int],
) -> Placement | None:  # fmt: skip
    """``req.each`` of each of ``k`` GPUs, on one node (unless ``k`` is more than any node
    has): each GPU judged as a share of one would be, the node whose ``k`` best GPUs add up
    to the lowest keys chosen (fewer preferred GPUs left out first)."""
    by_node: dict[int, list[tuple[tuple[float, ...], int]]] = {}
    for p, key, _ in _share_keys(cap, req, how, profile, exclude, allowed, name, prefer, {}):
        by_node.setdefault(cap.node_of[p], []).append((key, p))
    if all(len(ps) < k for ps in cap.node_pos):  # bigger than any node: spread over nodes
        every = sorted(c for cands in by_node.values() for c in cands)
        if len(every) < k:
            return None
        chosen = tuple(sorted(p for _, p in every[:k]))
        return Placement(chosen, cap.node_of[chosen[0]], req.mem)
    best: tuple[tuple[float, ...], int, list[int]] | None = None
    for n, cands in by_node.items():
        if len(cands) < k:
            continue
        cands.sort()
        top = cands[:k]
        width = len(top[0][0])
        score = tuple(sum(key[i] for key, _ in top) for i in range(width - 1))
        if best is None or (score, n) < best[:2]:
            best = (score, n, [p for _, p in top])
    if best is None:
        return None
    return Placement(tuple(sorted(best[2])), best[1], req.mem)


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
            d = _node_delta(cap, pn, n, req, 0.0)
            d += profile.scarce.delta(cap, n, 0, req.cpu or 0.0, float(req.ram or 0), 0.0)
            key: tuple[float, ...] = (d, left, n)
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
    before = node_free * profile.p_stranded(cap, before_cpu, before_ram)
    after = (node_free - gpus) * profile.p_stranded(cap, before_cpu - cpu, before_ram - ram)
    keep = profile.per_gpu(cap)
    short = _short(keep, node_free - gpus, before_cpu - cpu, before_ram - ram)
    return after - before + short - _short(keep, node_free, before_cpu, before_ram)


def _short(keep: tuple[float, float], free: float, cpu: float, ram: float) -> float:
    """Free GPUs the node cannot feed: the demand to come needs ``keep`` cores (and RAM) per
    GPU (:meth:`Profile.per_gpu`), so a node with less CPU (RAM) left than that strands the
    rest *in aggregate*, however small each next pod is."""
    short = 0.0
    cpu_per_gpu, ram_per_gpu = keep
    if cpu < INF and cpu_per_gpu > 0:
        short = free - cpu / cpu_per_gpu
    if ram < INF and ram_per_gpu > 0:
        short = max(short, free - ram / ram_per_gpu)
    return short if short > 0.0 else 0.0
