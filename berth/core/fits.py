"""Where a request fits within one scheduling pass (:mod:`berth.core.schedpass`): ``place()``
with memory (:class:`Fits`), and the blocked head job's reservation (:func:`reservation`).

Within a pass capacity only shrinks, so a request that did not fit still does not, until the
pass starts another job; every answer here is what ``place()`` would say now.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from berth.core.capacity import EPS, INF, Capacity
from berth.core.job import Job
from berth.core.placement import Placement, Profile, could_fit, place
from berth.core.request import Request

#: (expected end, start, job id, job) of a running job or one started in the pass.
End = tuple[float, float, int, Job]


def req_key(r: Request) -> tuple[object, ...]:
    """What placing a request depends on: requests with the same key fit the same way."""
    return (r.gpus, r.each, r.mem, r.gpu_ids, r.prefer, r.name, r.cpu, r.ram)


class Fits:
    """``place()`` with memory: within a pass capacity only shrinks, so a request that did not
    fit still does not (and, without constraints, neither does a bigger one of the same kind:
    one that must fit on one node, or one that spreads over nodes); results are reused until
    the next start changes the capacity. Every answer is what ``place()`` would say now, so
    which requests were asked before changes nothing but the time taken."""

    __slots__ = ("cap", "details", "fail_share", "fail_whole", "how", "memo", "node_max", "profile")

    def __init__(self, cap: Capacity, how: str, profile: Profile | None) -> None:
        self.cap, self.how, self.profile = cap, how, profile
        # [without, with] the reservation excluded; whole GPUs: [on one node, across nodes]
        # (a job bigger than any node spreads over nodes: it may fit where a smaller one
        # that must stay on one node does not)
        self.fail_whole = [[INF, INF], [INF, INF]]
        self.fail_share = [INF, INF]
        self.node_max = max((len(ps) for ps in cap.node_pos), default=0)
        self.memo: dict[tuple[object, ...], Placement | None] = {}
        self.details: dict[tuple[object, ...], str] = {}  # Resources details, same way

    def started(self) -> None:
        self.memo.clear()
        self.details.clear()

    def get(self, req: Request, exclude: Collection[int]) -> Placement | None:
        slot = 1 if exclude else 0
        simple = (
            req.gpu_ids is None and req.name is None and req.mem is None and not req.cpu
            and not req.shares  # (shares of several GPUs: neither kind of size below)
        )  # fmt: skip
        if simple and not req.ram:
            if req.whole and req.gpus >= self.fail_whole[slot][req.gpus > self.node_max]:
                return None
            if 0 < req.gpus < 1 and req.gpus >= self.fail_share[slot]:
                return None
        key = (*req_key(req), slot)
        if key in self.memo:
            return self.memo[key]
        pl = self.memo[key] = place(self.cap, req, self.how, self.profile, exclude)
        if pl is None and simple and not req.ram:
            if req.whole:
                fw = self.fail_whole[slot]
                span = req.gpus > self.node_max
                fw[span] = min(fw[span], req.gpus)
            elif req.gpus > 0:
                self.fail_share[slot] = min(self.fail_share[slot], req.gpus)
        return pl


    def get_off(
        self, req: Request, exclude: Collection[int], off: frozenset[int]
    ) -> Placement | None:
        """:meth:`get`, also kept off the positions ``off`` (admin reservations)."""
        if not off:
            return self.get(req, exclude)
        # (rare: admin reservations; not remembered)
        return place(self.cap, req, self.how, self.profile, off.union(exclude))

    def fit(
        self, req: Request, reserved: Collection[int], off: frozenset[int], ends_by: float,
        shadow: float,
    ) -> tuple[Placement | None, bool]:  # fmt: skip
        """(where it starts: outside the head's reservation ``reserved``, or anywhere free if
        it ends (``ends_by``) before the ``shadow`` time; True if it fits only where the head
        job's reservation is). ``off``: positions admin reservations keep it off."""
        pl = self.get_off(req, reserved, off)
        if pl is None and reserved:
            fits_all = self.get_off(req, (), off)
            if fits_all is not None:
                if ends_by <= shadow < INF:
                    return fits_all, False
                return None, True
        return pl, False

    def within(self, req: Request, only: Collection[int], off: Iterable[int]) -> Placement | None:
        """Where a share job may start on the GPUs ``only`` (indices: those its user holds
        part of, :meth:`berth.core.limits.Held.within`), off the positions ``off``, or None."""
        cap = self.cap
        keep = {cap.pos[g] for g in only if g in cap.pos}
        exclude = set(range(len(cap.index))) - keep
        exclude.update(off)
        return place(cap, req, self.how, self.profile, exclude)


def reservation(
    cap: Capacity, ends: list[End], placed: dict[int, Placement], req: Request, how: str,
    profile: Profile | None, exclude: Collection[int] = (),
    changes: Sequence[tuple[float, Collection[int]]] = (),
) -> tuple[float, set[int]]:  # fmt: skip
    """(shadow time, positions) of the blocked head job's reservation: release the running
    jobs (and those ``placed`` in this pass) in order of their expected end until ``req``
    fits; (INF, no positions) if it never does. ``exclude``: positions admin reservations
    keep the job off now; ``changes``: (time, the positions kept off from then), in time
    order (the admin reservations' starts and ends: a window that closes frees its GPUs)."""
    trial = cap.copy()
    steps = sorted(ends)  # (ids are unique: jobs are never compared)
    k, n = 0, len(changes)
    for end, _, jid, job in steps:
        while k < n and changes[k][0] < end:  # a window opens or closes before this end
            exclude = changes[k][1]
            fit = place(trial, req, how, profile, exclude) if could_fit(trial, req) else None
            if fit is not None:
                return changes[k][0], set(fit.positions)
            k += 1
        a = job.attempt
        r = job.request
        pl = placed.get(jid)
        if pl is not None:  # started in this pass
            trial.take(pl.positions, r.share, pl.mem, pl.node, r.cpu, r.ram, sign=-1.0)
        elif a is not None:
            trial.take_gpus(a.gpus, a.share, a.mem, a.node, r.cpu, r.ram, sign=-1.0)
        while k < n and changes[k][0] <= end:
            exclude, k = changes[k][1], k + 1
        if not could_fit(trial, req):
            continue  # (what place() would find at once, without building its arguments)
        fit = place(trial, req, how, profile, exclude)
        if fit is not None:
            return end, set(fit.positions)
    for t, off in changes[k:]:  # every job released: only the windows still change
        if (fit := place(trial, req, how, profile, off)) is not None:
            return t, set(fit.positions)
    return INF, set()


def passed_over(
    free_out: tuple[int, float, int, float], job: Job, ends_by: float, shadow: float,
    reserved: bool,
) -> bool:
    """After a reservation: ``job`` can neither fit outside it (``free_out``:
    :meth:`Capacity.free_outside`) nor end (``ends_by``: its expected end) before the
    ``shadow`` time in all that is free."""
    whole_out, share_out, whole_all, share_all = free_out
    g = job.request.size  # (shares of several GPUs: the share of each, a necessary test)
    return (g > whole_out if g >= 1 else g - EPS > share_out) and not (
        reserved and ends_by <= shadow < INF
        and (g <= whole_all if g >= 1 else g - EPS <= share_all)
    )  # fmt: skip


def ends_by(
    job: Job, start: float | None, now: float, predicted: Callable[[Job], float | None] | None
) -> float:
    """A job started at ``start`` (None: ``now``): its expected end by its limit, else by its
    ``predicted`` run time (``Inputs.predicted``; never before ``now``), else never."""
    start = now if start is None else start
    if job.time_limit is not None:
        return start + job.time_limit
    took = predicted(job) if predicted is not None else None
    return INF if took is None else max(now, start + took)


def cpu_only(jobs: Sequence[Job]) -> bool:
    """Some job asks for no GPU, only node CPU (``-g 0``: a CPU slot)."""
    return any(j.request.gpus == 0 and j.request.cpu for j in jobs)


def nothing_left(cap: Capacity, cpu_jobs: bool) -> bool:
    """Nothing more can start: no GPU nor share of one is free, and (``cpu_jobs``: some job
    needs CPU only) no node has CPU left."""
    if cap.n_whole_free or not all(
        f <= 1e-6 or not u for f, u in zip(cap.free, cap.usable, strict=True)
    ):
        return False
    return not (cpu_jobs and any(c > EPS for c in cap.node_cpu))
