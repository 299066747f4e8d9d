"""The order a scheduling pass considers pending jobs in: the policy's sort key, fair share's
interleaving of tenants, and the requeue rule on top of every policy.

The requeue rule (seed 003's "context switch"): a job requeued at its time limit (or preempted)
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
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence

from berth.core.capacity import INF
from berth.core.job import Job
from berth.core.states import State

#: The run time ``balanced`` assumes for a job without a time limit.
UNKNOWN_LIMIT = 86400.0


def order_key(job: Job, policy: str, now: float = 0.0) -> tuple[float, ...]:
    """The sort key of ``policy`` at ``now`` (fairshare adds the tenant order on top, and
    :func:`requeued_last` the requeue rule)."""
    if policy == "balanced":
        limit = job.time_limit if job.time_limit is not None else UNKNOWN_LIMIT
        urgency = max(0.0, now - job.queue_time) / math.sqrt(max(limit, 1.0))
        return (-job.priority, -urgency, job.queue_time, job.id)
    if policy in ("fifo", "fifo-backfill"):
        return (job.queue_time, job.id)
    if policy == "sjf":
        limit = job.time_limit if job.time_limit is not None else INF
        return (limit, -job.priority, job.queue_time, job.id)
    return (-job.priority, job.queue_time, job.id)


def ordered(
    pending: Sequence[Job], policy: str, presorted: bool, now: float,
    tenant_gpus: Mapping[str, float], usage: Mapping[str, float] | None,
) -> Iterator[Job]:  # fmt: skip
    """``pending`` in the order a pass considers them (``presorted``: already in
    :func:`order_key` order). For fairshare, ``tenant_gpus`` may grow while this is consumed
    (jobs started in the pass)."""
    jobs: Iterable[Job] = (
        pending if presorted else sorted(pending, key=lambda j: order_key(j, policy, now))
    )
    if policy == "fairshare":
        jobs = _fairshare(jobs, tenant_gpus, usage)
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


class Ranking:
    """The pending jobs in ``policy``'s order, kept across passes by a caller with a long queue
    (the simulator): :meth:`at` is exactly ``sorted(jobs, key=order_key(j, policy, now))``,
    for ``schedule(..., presorted=True)``, at a fraction of the cost of sorting every pass.

    Orders that do not move with the clock are kept sorted as jobs come and go (bisect).
    ``balanced``'s order moves with the clock: :meth:`at` re-sorts the previous order, which is
    nearly sorted already (Python's sort is then about linear), with the keys of
    :func:`order_key` computed inline from what it keeps of each job (its priority, queue time
    and the square root of its limit: they must not change while the job is here).
    """

    __slots__ = ("count", "dynamic", "entries", "jobs", "keys", "policy")

    def __init__(self, policy: str) -> None:
        self.policy = "priority" if policy == "fairshare" else policy  # (ordered() interleaves)
        self.dynamic = policy == "balanced"
        self.jobs: list[Job] = []  # static orders: sorted; balanced: the last order
        self.keys: list[tuple[float, ...]] = []  # static orders: the sort keys
        # balanced: (-priority, queue time, id, sqrt of the limit, job), in the last order;
        # jobs that left stay until the next sort
        self.entries: list[tuple[int, float, int, float, Job]] = []
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def add(self, job: Job) -> None:
        self.count += 1
        if self.dynamic:
            limit = job.time_limit if job.time_limit is not None else UNKNOWN_LIMIT
            root = math.sqrt(max(limit, 1.0))
            self.entries.append((-job.priority, job.queue_time, job.id, root, job))
            return
        key = order_key(job, self.policy)
        k = bisect_left(self.keys, key)
        self.keys.insert(k, key)
        self.jobs.insert(k, job)

    def prune(self, gone: Iterable[Job]) -> None:
        """Forget these jobs (they left the queue: started, cancelled)."""
        for job in gone:
            self.count -= 1
            if self.dynamic:
                continue  # dropped by the next sort (they are no longer PENDING)
            k = bisect_left(self.keys, order_key(job, self.policy))
            if k < len(self.jobs) and self.jobs[k] is job:
                del self.keys[k]
                del self.jobs[k]

    def pending(self) -> Iterator[Job]:
        """The jobs, in no particular order."""
        if not self.dynamic:
            return iter(self.jobs)
        return (e[4] for e in self.entries if e[4].state is State.PENDING)

    def at(self, now: float) -> list[Job]:
        """The jobs in the order of ``order_key(job, policy, now)`` (don't change the list)."""
        if not self.dynamic:
            return self.jobs
        # order_key's (-priority, -urgency, queue time, id), urgency = max(0, now - q) / root:
        # -(x / r) is (-x) / r exactly, and a zero's sign does not change a comparison
        pending = State.PENDING
        dec = [
            (np, (q - now if now > q else 0.0) / r, q, i, e)
            for e in self.entries
            for np, q, i, r, j in (e,)
            if j.state is pending
        ]
        dec.sort()
        self.entries = [d[4] for d in dec]
        self.jobs = [e[4] for e in self.entries]
        return self.jobs
