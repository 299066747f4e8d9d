"""Human details for pending reasons, and requests that can never be met."""

from __future__ import annotations

from berth.core.capacity import EPS, Capacity
from berth.core.request import Request
from berth.core.states import Reason
from berth.units import format_size


def _candidates(
    cap: Capacity, req: Request, *, ignore_paused: bool, ignore_health: bool = False
) -> list[int]:
    allowed = None if req.gpu_ids is None else set(req.gpu_ids)
    name = req.name.lower() if req.name else None
    out = []
    for p, index in enumerate(cap.index):
        if allowed is not None and index not in allowed:
            continue
        if name is not None and name not in cap.names[p]:
            continue
        healthy = cap.usable[p] or cap.paused[p] or ignore_health
        if not healthy or (cap.paused[p] and not ignore_paused):
            continue
        total = cap.mem_total[p]
        if req.mem is not None and total is not None and total < req.mem:
            continue
        out.append(p)
    return out


def static_reason(cap: Capacity, req: Request) -> tuple[Reason, str] | None:
    """BadConstraints when the request cannot run however long it waits; GpuUnhealthy when it
    could, but for GPUs the driver reports unhealthy (lost, not answering: until they are
    back, e.g. after a reset); GpuPaused when it waits for a GPU to be resumed. None if it
    could run once its GPUs are free."""
    k = req.count
    if k == 0:
        return None
    if req.gpu_ids is not None:
        unknown = [i for i in req.gpu_ids if i not in cap.pos]
        if unknown and len(req.gpu_ids) - len(unknown) < k:
            known = ", ".join(str(i) for i in cap.index)
            return Reason.BAD_CONSTRAINTS, f"no GPU {unknown[0]} here (GPUs: {known})"
    every = _candidates(cap, req, ignore_paused=True)
    if not _enough(cap, every, k):
        sick = [p for p in _candidates(cap, req, ignore_paused=True, ignore_health=True)
                if p not in every]  # fmt: skip
        if sick and _enough(cap, every + sick, k):
            ids = ",".join(str(cap.index[p]) for p in sick)
            return Reason.GPU_UNHEALTHY, (
                f"GPU {ids} unhealthy (lost or not answering the driver); {_what(req)}"
            )
        what = _what(req)
        if req.mem is not None and any(
            t is not None and t < req.mem for t in cap.mem_total
        ):  # fmt: skip
            biggest = max((t for t in cap.mem_total if t is not None), default=0)
            return Reason.BAD_CONSTRAINTS, (
                f"{what}: no GPU has {format_size(req.mem)} (largest {format_size(biggest)})"
            )
        return Reason.BAD_CONSTRAINTS, f"{what}: only {len(every)} GPU(s) here qualify"
    usable = _candidates(cap, req, ignore_paused=False)
    if not _enough(cap, usable, k):
        paused = sorted(cap.index[p] for p in every if cap.paused[p])
        return Reason.GPU_PAUSED, f"{what_paused(paused)} paused; {_what(req)}"
    return None


def _held(who: str) -> str:
    """What keeps a GPU, as words after "GPU 2": "held by job 3", but "reserved by a waiting
    `berth run`", "paused", "unhealthy" as they are (never "held by reserved by")."""
    if who.startswith(("reserved", "paused", "unhealthy")):
        return who
    return f"held by {who}"


def what_paused(paused: list[int]) -> str:
    return "GPU " + ",".join(str(i) for i in paused) if paused else "GPUs"


def _enough(cap: Capacity, positions: list[int], k: int) -> bool:
    if len(positions) < k:
        return False
    if all(len(ps) < k for ps in cap.node_pos):
        return True  # spans nodes
    per_node: dict[int, int] = {}
    for p in positions:
        per_node[cap.node_of[p]] = per_node.get(cap.node_of[p], 0) + 1
    return max(per_node.values()) >= k


def _what(req: Request) -> str:
    if req.whole:
        what = f"needs {req.count} GPU" + ("s" if req.count > 1 else "")
    elif req.shares:
        what = f"needs {req.each:g} of each of {req.count} GPUs"
    else:
        what = f"needs {req.gpus:g} of a GPU"
    if req.mem is not None:
        what += f" with {format_size(req.mem)}"
    if req.gpu_ids is not None:
        what += " among GPU " + ",".join(str(i) for i in req.gpu_ids)
    if req.name:
        what += f" named *{req.name}*"
    return what


def resources_detail(cap: Capacity, req: Request) -> str:
    """``"needs 2 GPUs: GPU 1 held by job 3, GPU 2 held by claim by alice"``."""
    if req.count == 0:
        return "needs CPU/RAM on a node"
    cands = _candidates(cap, req, ignore_paused=False)
    busy: list[tuple[int, str]] = []  # (GPU index, what keeps it)
    free = 0
    for p in cands:
        if req.whole:
            ok = cap.free[p] >= 1.0 - EPS and not cap.busy[p]
        else:
            ok = cap.free[p] >= req.share - EPS
        if ok and cap.mem_free[p] >= cap.charge(p, req.share, req.mem):
            free += 1
            continue
        who = cap.who(p)
        if who:
            who = _held(who)
            if not req.whole and cap.free[p] >= req.share - EPS:  # (its memory keeps it off)
                who += f", {format_size(int(cap.mem_free[p]))} free"
        else:
            mem = format_size(int(cap.mem_free[p]))
            who = "held by outside processes" if cap.busy[p] else f"has {mem} free"
        if not req.whole and cap.free[p] < req.share - EPS:
            who += f", {max(0.0, cap.free[p]):.2f} of it free"
        busy.append((cap.index[p], who))
    head = _what(req)
    if req.gpu_ids is not None and len(busy) == 1 and req.count == 1:
        return f"waiting for GPU {busy[0][0]} ({busy[0][1]})"
    said = [f"GPU {i} {what}" for i, what in busy]
    shown = "; ".join(said[:4]) + (f"; {len(said) - 4} more" if len(said) > 4 else "")
    return f"{head}, {free} free" + (f": {shown}" if shown else "")
