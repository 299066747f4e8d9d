"""Fair share between users by decayed GPU usage, as Slurm's classic fair share.

A user's (tenant's) *usage* is the GPU-seconds their jobs held, each second weighed down by
half every ``half_life`` since it was used (default 7 days, ``[scheduling]
fairshare_half_life``): yesterday's hour counts almost in full, last month's about a twentieth.
Running jobs count too, for the time they have run so far, so a user whose long jobs hold the
GPUs is not "cheap" while they run. The caller (the daemon, the simulator) keeps a
:class:`Book` of what ended attempts used, and hands :func:`usage_at` to ``schedule(...,
fair=FairShare(...))`` each pass: nothing here reads a clock.

Order: between users, the lowest usage per share first (``usage / shares``; shares are weights,
1 each by default). That is Slurm's order by the factor ``F = 2^(-U/S)`` (:func:`factors`, U
the user's fraction of all usage, S their fraction of all shares): F is higher exactly when
U/S is lower. Within a user: their own jobs in the policy's order (their priority first, then
the policy's key); a user's priority never jumps over another user.

Projects (Slurm's accounts; ``Job.project``, "" for none) come first, as in Slurm's *fair
tree*: the project with the lowest usage per share (``project_usage / project_shares``) gives
the next job, and within it the user with the lowest usage per share; so a project whose
users ran a lot yields to one that ran little, however many users each has. A user's usage
is theirs in all projects. With one project (or none) the order is the one above.

Within one pass usage does not move with time; a job started in the pass is charged at once
with what it may use (its GPUs times its time limit, or times a day without one, as
``balanced`` assumes), so GPUs freed at the same moment are shared out between users rather
than all going to whoever was lowest. From the next pass on, the job counts for the time it
has actually run.

With one user (a user's own daemon) the order is exactly the policy's.

A share is charged as the whole GPU (:func:`charged_gpus`, issue 41.3): however small, it
keeps the GPU from every exclusive job, so what it costs the others is the GPU. A job of
-g 0.5 uses one GPU-second a second, as does a claim of 0.01 outside the queue.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from berth.core.job import Job
from berth.core.request import Request

DEFAULT_HALF_LIFE = 7 * 86400.0
#: The run time charged in a pass to a job started without a time limit (as ``balanced``).
UNKNOWN_RUN = 86400.0
INF = float("inf")


def decay(value: float, elapsed: float, half_life: float) -> float:
    """``value`` aged by ``elapsed`` seconds (halved every ``half_life``; inf: never)."""
    if elapsed <= 0 or half_life == INF or value == 0:
        return value
    return value * math.exp(-math.log(2) * elapsed / half_life)


def accrued(gpus: float, start: float, end: float, now: float, half_life: float) -> float:
    """Decayed GPU-seconds, as of ``now``, of holding ``gpus`` GPUs from ``start`` to ``end``:
    the integral of ``gpus * 2^(-(now - t) / half_life)`` over the interval, exactly."""
    end = min(end, now)
    if end <= start or gpus <= 0:
        return 0.0
    if half_life == INF:
        return gpus * (end - start)
    k = math.log(2) / half_life
    return gpus / k * math.exp(-k * (now - end)) * -math.expm1(-k * (end - start))


class Book:
    """Each tenant's decayed usage of ended attempts: ``(value, as_of)``, aged on reading."""

    __slots__ = ("entries", "half_life")

    def __init__(
        self,
        half_life: float = DEFAULT_HALF_LIFE,
        entries: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:
        if not half_life > 0:
            raise ValueError(f"half-life {half_life!r}: must be positive")
        self.half_life = half_life
        self.entries: dict[str, tuple[float, float]] = dict(entries or {})

    def value(self, tenant: str, now: float) -> float:
        entry = self.entries.get(tenant)
        if entry is None:
            return 0.0
        return decay(entry[0], now - entry[1], self.half_life)

    def values(self, now: float) -> dict[str, float]:
        return {t: decay(v, now - at, self.half_life) for t, (v, at) in self.entries.items()}

    def add(self, tenant: str, gpus: float, start: float, end: float, now: float) -> float:
        """Record an attempt that held ``gpus`` from ``start`` to ``end``; the tenant's usage
        as of ``now`` (also what is kept, ``as_of=now``)."""
        value = self.value(tenant, now) + accrued(gpus, start, end, now, self.half_life)
        self.entries[tenant] = (value, now)
        return value


def usage_at(
    book: Book, running: Iterable[Job], now: float, by: str = "tenant"
) -> dict[str, float]:
    """Every tenant's usage at ``now``: the book, plus what running jobs used so far.
    ``by="project"``: every project's (a book kept per project)."""
    out = book.values(now)
    for job in running:
        a = job.attempt
        if a is None or a.end is not None:
            continue
        used = accrued(charged_gpus(job.request), a.start, now, now, book.half_life)
        key = job.project if by == "project" else job.tenant
        out[key] = out.get(key, 0.0) + used
    return out


@dataclass(frozen=True, slots=True)
class FairShare:
    """What a pass needs for fair share: ``usage`` (decayed GPU-seconds per tenant, running
    jobs included: :func:`usage_at`) and ``shares`` (weights; 1 for a tenant not listed);
    ``project_usage`` and ``project_shares``: the same per project (the upper level)."""

    usage: Mapping[str, float] = field(default_factory=dict)
    shares: Mapping[str, float] = field(default_factory=dict)
    project_usage: Mapping[str, float] = field(default_factory=dict)
    project_shares: Mapping[str, float] = field(default_factory=dict)

    def share(self, tenant: str) -> float:
        s = self.shares.get(tenant, 1.0)
        return s if s > 0 else 1e-9

    def key(self, tenant: str, charged: float = 0.0) -> float:
        """Usage per share (lower goes first)."""
        return (self.usage.get(tenant, 0.0) + charged) / self.share(tenant)

    def project_key(self, project: str, charged: float = 0.0) -> float:
        """A project's usage per share (lower goes first)."""
        s = self.project_shares.get(project, 1.0)
        return (self.project_usage.get(project, 0.0) + charged) / (s if s > 0 else 1e-9)

    def projects(self) -> FairShare:
        """The upper level as a one-level FairShare (for :func:`factors`)."""
        return FairShare(self.project_usage, self.project_shares)


def charged_gpus(request: Request) -> float:
    """The GPUs a job is charged for in its usage: every GPU it holds any part of, whole."""
    return float(request.count)


def fair_charge(job: Job) -> float:
    """What a job started in a pass counts for in the rest of that pass (GPU-seconds)."""
    run = job.time_limit if job.time_limit is not None else UNKNOWN_RUN
    return charged_gpus(job.request) * run


def interleave(
    jobs: Iterable[Job], fair: FairShare, charged: Mapping[str, float],
    done: Collection[str] = (), charged_projects: Mapping[str, float] | None = None,
    done_projects: Collection[str] = (),
) -> Iterator[Job]:  # fmt: skip
    """``jobs`` (in the policy's order) regrouped by project, then tenant: the next job is
    always the first not yet given of the tenant with the lowest ``fair.key`` in the project
    with the lowest ``fair.project_key`` (``charged`` / ``charged_projects``: what jobs
    started in this pass added; the caller adds to them as jobs start). Tenants of equal key
    (two new users: both 0) are taken in the policy's order of their next jobs, as one
    tenant's are; projects of equal key likewise, by their first job not yet given.
    ``done`` / ``done_projects``: tenants / projects none of whose jobs can start in this pass
    (the caller adds to them, e.g. a user at their GPU limit): their other jobs are not given,
    so a tenant with a long queue it cannot use costs the pass nothing per job (issue 20.10)."""
    projects: dict[str, dict[str, list[tuple[int, Job]]]] = {}
    left: dict[str, list[int]] = {}  # each project's places, in order
    for k, job in enumerate(jobs):  # (k: its place in the policy's order)
        queues = projects.get(job.project)
        if queues is None:
            queues = projects[job.project] = {}
            left[job.project] = []
        left[job.project].append(k)
        q = queues.get(job.tenant)
        if q is None:
            queues[job.tenant] = [(k, job)]
        else:
            q.append((k, job))
    if len(projects) == 1:
        yield from (job for _, job in _tenants(next(iter(projects.values())), fair, charged,
                                                 done))  # fmt: skip
        return
    pcharged = charged_projects if charged_projects is not None else {}
    heap = [(fair.project_key(p, pcharged.get(p, 0.0)), left[p][0], p) for p in projects]
    heapq.heapify(heap)
    within = {p: _tenants(q, fair, charged, done) for p, q in projects.items()}
    gone: set[int] = set()  # the places of the jobs given
    at = dict.fromkeys(projects, 0)  # left[p][at[p]]: the project's first job not given
    while heap:
        _, _, p = heapq.heappop(heap)
        if p in done_projects:
            continue
        given = next(within[p], None)
        if given is None:
            continue
        yield given[1]  # (the caller may start it: only this project's key can change)
        gone.add(given[0])
        ks, i = left[p], at[p]
        while i < len(ks) and ks[i] in gone:
            i += 1
        at[p] = i
        if i < len(ks):
            heapq.heappush(heap, (fair.project_key(p, pcharged.get(p, 0.0)), ks[i], p))


def _tenants(
    queues: dict[str, list[tuple[int, Job]]], fair: FairShare, charged: Mapping[str, float],
    done: Collection[str],
) -> Iterator[tuple[int, Job]]:  # fmt: skip
    """One project's jobs (``queues``: per tenant, each in the policy's order, with its place
    in it), the tenant with the lowest ``fair.key`` first (of equal keys, the one whose next
    job comes first), as :func:`interleave` says; each with its place."""
    if len(queues) == 1:
        t, q = next(iter(queues.items()))
        for entry in q:
            if t in done:
                return
            yield entry
        return
    heap = [(fair.key(t, charged.get(t, 0.0)), q[0][0], t) for t, q in queues.items()]
    heapq.heapify(heap)
    pos = dict.fromkeys(queues, 0)
    while heap:
        _, _, t = heapq.heappop(heap)
        if t in done:
            continue
        q, i = queues[t], pos[t]
        yield q[i]  # (the caller may start it: only this tenant's key can change)
        if i + 1 < len(q):
            pos[t] = i + 1
            heapq.heappush(heap, (fair.key(t, charged.get(t, 0.0)), q[i + 1][0], t))


def factors(fair: FairShare, tenants: Iterable[str]) -> dict[str, float]:
    """Slurm's classic fair-share factor ``2^(-U/S)`` of each tenant, in [0, 1]: U its
    fraction of the usage of ``tenants``, S its fraction of their shares. 1: has used nothing;
    0.5: used exactly its share; lower: more than its share."""
    names = list(dict.fromkeys(tenants))
    total_u = sum(max(0.0, fair.usage.get(t, 0.0)) for t in names)
    total_s = sum(fair.share(t) for t in names)
    out = {}
    for t in names:
        u = max(0.0, fair.usage.get(t, 0.0)) / total_u if total_u > 0 else 0.0
        s = fair.share(t) / total_s if total_s > 0 else 1.0
        out[t] = 2.0 ** (-u / s)
    return out
