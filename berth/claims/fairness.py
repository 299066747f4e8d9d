"""Fairness between waiters: older waiters reserve the capacity they are waiting for.

The rule (also in docs/claims.md):

1. Every process that waits for GPUs registers a waiter file with an arrival ticket, and holds
   it (flock) while it waits; a dead waiter's file is ignored at once.
2. Each waiter, oldest first, *reserves* the GPUs it would take: those that qualify for it now
   (by its own filters, after what older waiters reserve), then, if those are too few, GPUs
   held by berth claims that would qualify once their holders leave. It reserves only when
   that reaches the number it needs (a waiter that cannot be served by berth claims ending,
   e.g. because a GPU is used outside berth, blocks nobody).
3. A claim may only use capacity not reserved by an older living waiter: a reservation counts
   like a claim of the same share and memory for everyone younger.

So a 4-GPU waiter on a 4-GPU host is not starved by a stream of 1-GPU claims (they queue
behind it as the GPUs come free), while a 1-GPU claim still takes a GPU that no older waiter
can use (another name, a share that still fits, a GPU outside the older waiter's ``--only``).
"""

from __future__ import annotations

from berth.selection.choose import matches, select

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from berth.devices.model import GpuSnapshot
    from berth.selection.choose import Claimed
    from berth.selection.filters import Filters

Reservation = list[tuple[str, float, int]]


def idle_view(gpu: GpuSnapshot, held: Claimed | None) -> GpuSnapshot:
    """The GPU as it would look once berth's holders (``held.pids``) left it."""
    if held is None:
        return gpu
    procs = gpu.processes
    used = gpu.memory_used
    if procs is not None:
        mine = [p for p in procs if p.pid in held.pids]
        procs = tuple(p for p in procs if p.pid not in held.pids)
        if used is not None:
            used = max(0, used - sum(p.used_memory or 0 for p in mine))
    free = gpu.memory_free
    if used is not None and gpu.memory_total is not None:
        free = gpu.memory_total - used
    view: GpuSnapshot = gpu.replace(
        processes=procs,
        memory_used=used,
        memory_free=free,
        utilization=None if gpu.utilization is None else 0,
        memory_utilization=None if gpu.memory_utilization is None else 0,
        power_draw=None if gpu.power_draw is None else 0.0,
    )
    return view


def reservation(
    gpus: Sequence[GpuSnapshot],
    filters: Filters,
    qualified_now: Sequence[GpuSnapshot],
    claims: Mapping[str, Claimed],
    older: Mapping[str, Claimed],
    banned: Mapping[int, str] | None = None,
    keep: Sequence[str] = (),
) -> Reservation:
    """What a waiter reserves (rule 2): [(uuid, share, memory bytes)], maybe empty.

    ``qualified_now``: the GPUs that qualify for it now (selection against claims + older
    reservations); ``claims``: what berth claims hold; ``older``: older waiters' reservations;
    ``banned``: why the config keeps berth off a GPU (by index); ``keep``: the GPUs it
    reserves now, kept first, in their order, where they still serve.
    """
    want = filters.count
    now = [g.uuid for g in qualified_now]
    later: list[str] = []
    if len(now) < want:
        held_uuids = {u for u, h in claims.items() if h.share > 0}
        views = [idle_view(g, claims.get(g.uuid)) for g in gpus]
        for g in select(views, filters, older, banned).qualified:
            if g.uuid in held_uuids and g.uuid not in now:
                later.append(g.uuid)
    if len(now) + len(later) < want:
        return []
    # Deterministic (what it reserves already, then GPU order, preferred first), whatever
    # the order asked: a reservation that changed on every look would wake the other
    # waiters, who would look again... and one that moved to a GPU another waiter left
    # would move the next waiter's, and the next's (each a rewrite that wakes them all).
    rank = {g.uuid: k for k, g in enumerate(gpus)}
    preferred = [g.uuid for g in gpus if any(matches(g, p) for p in filters.prefer)]
    first = {u: k for k, u in enumerate(preferred)}
    kept = {u: k for k, u in enumerate(keep)}

    def key(u: str) -> tuple[int, int, int]:
        return (kept.get(u, len(kept)), first.get(u, len(first)), rank[u])

    now.sort(key=key)
    later.sort(key=key)
    mem = filters.mem or 0
    return [(u, filters.share, mem) for u in (now + later)[:want]]
