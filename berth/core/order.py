"""The order a scheduling pass considers pending jobs in: the policy's sort key, fair share's
interleaving of tenants, and the requeue rule on top of every policy.

The requeue rule (mgpu_srun's "context switch"): a job requeued at its time limit (or preempted)
goes to the *end* of the queue: it comes after every job that was waiting when it was
preempted, whatever the policy would say (a short job under ``sjf`` or ``balanced``, a high
priority under ``priority``): the jobs that waited get their turn first. Jobs that arrive after
the preemption are ordered against it by the policy as usual. A requeued job is one whose
``queue_time`` (set to the preemption time by :func:`~berth.core.transition.transition`) is
later than its ``submit_time``; "was waiting when it was preempted" = is pending now and
queued before that time (``queue_time`` strictly earlier).

This is not a sort key (with later arrivals it is not transitive: the policy may put a later
arrival B before the requeued R, and R before an older job A, which the rule puts before R),
so :func:`requeued_last` applies it to the policy's order: it holds a requeued job back until
every job queued before it has been given out. It costs nothing until a pass meets a
requeued job.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence

from berth.core.capacity import INF
from berth.core.fairshare import FairShare, interleave
from berth.core.guard import UNKNOWN_LIMIT as UNKNOWN_LIMIT
from berth.core.guard import area, first
from berth.core.job import Job


def order_key(job: Job, policy: str, now: float = 0.0) -> tuple[float, ...]:
    """The sort key of ``policy`` at ``now`` (fairshare adds the tenant order on top, and
    :func:`requeued_last` the requeue rule)."""
    if policy == "balanced":
        limit = job.time_limit if job.time_limit is not None else UNKNOWN_LIMIT
        urgency = max(0.0, now - job.queue_time) / math.sqrt(max(limit, 1.0))
        return (-job.priority, -urgency, job.queue_time, job.id)
    if policy == "guarded":  # (and one overdue job first: berth.core.guard)
        return (-job.priority, area(job), job.queue_time, job.id)
    if policy in ("fifo", "fifo-backfill"):
        return (job.queue_time, job.id)
    if policy == "sjf":
        limit = job.time_limit if job.time_limit is not None else INF
        return (limit, -job.priority, job.queue_time, job.id)
    return (-job.priority, job.queue_time, job.id)


def ordered(
    pending: Sequence[Job], policy: str, presorted: bool, now: float,
    tenant_gpus: Mapping[str, float], usage: Mapping[str, float] | None,
    walk: Iterable[Job] | None = None,
    fair: FairShare | None = None, charged: Mapping[str, float] | None = None,
    done: Collection[str] = (), charged_projects: Mapping[str, float] | None = None,
    done_projects: Collection[str] = (), head: Job | None = None,
) -> Iterator[Job]:  # fmt: skip
    """``pending`` in the order a pass considers them (``presorted``: already in
    :func:`order_key` order; ``walk``: that order, walked lazily). For fairshare,
    ``tenant_gpus`` may grow while this is consumed (jobs started in the pass); with fair
    share by usage, the tenants in ``done`` (filled while this is consumed) give no more.
    ``head``: ``guarded``'s overdue job, first within its priority (:mod:`berth.core.guard`)."""
    jobs: Iterable[Job]
    if walk is not None:
        jobs = walk
    elif presorted:
        jobs = pending
    else:
        jobs = sorted(pending, key=lambda j: order_key(j, policy, now))
    if head is not None:
        jobs = first(jobs, head)
    if fair is not None:  # fair share by decayed usage, over any policy
        jobs = interleave(jobs, fair, charged if charged is not None else {}, done,
                          charged_projects, done_projects)  # fmt: skip
    elif policy == "fairshare":
        jobs = _fairshare(jobs, tenant_gpus, usage)
    if walk is not None and not getattr(walk, "requeued", True):
        return iter(jobs)  # (a walk that knows it holds no requeued job)
    return requeued_last(jobs, pending)


def requeued(job: Job) -> bool:
    """Whether the job went back to the queue after running (preempted or requeued)."""
    return job.queue_time > job.submit_time


def requeued_last(jobs: Iterable[Job], pending: Sequence[Job]) -> Iterator[Job]:
    """``jobs`` (all of ``pending``, in the policy's order), with each requeued job held back
    until every pending job queued before it has been given out (the requeue rule above)."""
    it = iter(jobs)
    given: list[Job] = []
    for job in it:  # as they come, until the first requeued job
        if job.queue_time > job.submit_time:
            break
        given.append(job)
        yield job
    else:
        return
    yield from _hold_back(job, it, {j.id for j in given}, pending)


def _hold_back(
    first: Job, rest: Iterator[Job], given: set[int], pending: Sequence[Job]
) -> Iterator[Job]:
    by_queue = sorted((j.queue_time, j.id) for j in pending)
    lo = 0  # by_queue[lo:] holds every job not given out yet
    held: list[tuple[float, int, Job]] = []  # (queue_time, arrival, job): held back
    arrival = itertools.count()
    for job in itertools.chain((first,), rest):
        while lo < len(by_queue) and by_queue[lo][1] in given:
            lo += 1
        if requeued(job) and lo < len(by_queue) and by_queue[lo][0] < job.queue_time:
            heapq.heappush(held, (job.queue_time, next(arrival), job))
            continue
        given.add(job.id)
        yield job
        # Release the held jobs whose predecessors are all out (the earliest-queued first:
        # each was waiting when the later ones were preempted).
        while held:
            while lo < len(by_queue) and by_queue[lo][1] in given:
                lo += 1
            if lo < len(by_queue) and by_queue[lo][0] < held[0][0]:
                break
            r = heapq.heappop(held)[2]
            given.add(r.id)
            yield r
    while held:  # (only if ``jobs`` lacked some of ``pending``)
        r = heapq.heappop(held)[2]
        given.add(r.id)
        yield r


def _fairshare(
    jobs: Iterable[Job], tenant_gpus: Mapping[str, float], usage: Mapping[str, float] | None
) -> Iterator[Job]:
    queues: dict[str, list[Job]] = {}
    for j in jobs:
        queues.setdefault(j.tenant, []).append(j)
    heads = {t: 0 for t in queues}
    extra = usage or {}
    while heads:
        # the tenant with the least held (live: tenant_gpus grows as jobs start in this pass)
        t = min(heads, key=lambda t: (tenant_gpus.get(t, 0.0) + extra.get(t, 0.0), t))
        i = heads[t]
        yield queues[t][i]
        if i + 1 < len(queues[t]):
            heads[t] = i + 1
        else:
            del heads[t]
