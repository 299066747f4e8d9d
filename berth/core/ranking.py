"""The pending queue kept in a policy's order across passes, for a caller with a long queue
(the simulator: one pass per event, a queue of thousands): ``schedule(ranking.at(now), ...,
presorted=True)`` considers the jobs exactly in the order of ``sorted(jobs,
key=order_key(job, policy, now))``, without sorting the queue for every pass.

Orders that do not move with the clock are kept sorted as jobs come and go (bisect), and
:meth:`Ranking.at` is that list.

``balanced``'s order moves with the clock (urgency = wait / sqrt(limit)). The jobs are kept
in groups of one priority and similar limits (square roots within a factor 2^(1/16), limits
within 9%), each sorted by queue time: within a group the oldest job is the most urgent, up
to that factor. At
``now``, :class:`Walk` merges the groups lazily: it takes a group's next job only when the
group's bound (its oldest remaining job's wait over the group's smallest square root) could
beat the best job taken so far, and gives out a job only when no group could beat it. So the
order is exact, and a pass that stops early (every GPU taken) pays for the jobs it looked at,
not for the queue. And once the pass holds a reservation (:meth:`Walk.narrow`), only a job
that fits outside it, or ends before it and fits in all that is free, can start: the walk
leaves the others out, and drops at once the groups where no job can (by their fewest GPUs,
smallest share and shortest limit).

The groups' heap is built anew for each pass (one entry per group, about 80 on the whole
Philly trace): its keys move with the clock, each group's at its own rate, so a heap kept
between passes would need re-ordering as groups overtake each other (bench/RESULTS.md).
"""

from __future__ import annotations

import heapq
import itertools
import math
from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from berth.core.capacity import EPS, INF
from berth.core.guard import work
from berth.core.job import Job
from berth.core.order import UNKNOWN_LIMIT, order_key, requeued
from berth.core.profile import restricts
from berth.core.request import Request
from berth.core.states import State

# (queue time, id, sqrt of the limit, job, GPUs asked, time limit)
_Item = tuple[float, int, float, Job, float, float | None]


class _Group:
    """Pending jobs of one priority and similar limits, by (queue time, id)."""

    __slots__ = (
        "dead", "free", "items", "key", "limit", "np", "root", "share", "sizes", "start",
        "whole",
    )  # fmt: skip

    def __init__(self, key: tuple[int, int, bool], np: int, free: bool) -> None:
        self.key = key
        self.np = np  # -priority
        self.free = free  # CPU-only (or a tiny share): never left out by narrow()
        self.items: list[_Item] = []
        self.start = 0  # items[:start] have left the queue
        self.dead = 0  # items that left the queue (in items[start:])
        self.root = INF  # the smallest sqrt(limit) ever here: a bound for all
        self.limit = INF  # the shortest limit ever here (None counts as INF)
        self.sizes: dict[float, int] = {}  # GPUs asked -> how many jobs here ask that
        self.whole = INF  # the fewest whole GPUs asked here (of the jobs still here)
        self.share = INF  # the smallest share of a GPU asked here


def _back(g: _Group, item: _Item) -> None:
    """Put an older job in its place in ``g``: one that joins late, or one back with its old
    queue time (a start undone, a preemption), whose entry may still be there (left) or
    before ``g.start``: it is seen once, and from where a walk begins."""
    items = g.items
    k = bisect_left(items, item[:2], key=lambda it: it[:2])
    again = k < len(items) and items[k][3] is item[3]
    if not again:
        items.insert(k, item)
    if k < g.start:  # (the left entries between it and the old start count as dead)
        g.dead += g.start - k - 1 if again else g.start - k
        g.start = k
    elif again:
        g.dead = max(0, g.dead - 1)


class Ranking:
    """The pending jobs of a policy, in its order (see the module docstring). A job's
    priority, time limit, queue time, hold, dependencies and backoff must not change while it
    is here (take it out and add it again)."""

    __slots__ = (
        "areas", "count", "cpu_only", "dirty", "dynamic", "groups", "jobs", "keys", "no_gpu",
        "policy", "queued", "requeued", "restricted", "roots", "where", "work",
    )  # fmt: skip

    def __init__(self, policy: str) -> None:
        self.policy = "priority" if policy == "fairshare" else policy  # (ordered() interleaves)
        self.dynamic = policy == "balanced"
        self.jobs: list[Job] = []  # static orders: sorted
        self.keys: list[tuple[float, ...]] = []  # static orders: the sort keys
        self.groups: dict[tuple[int, int, bool], _Group] = {}  # balanced
        self.where: dict[int, _Group] = {}  # balanced: job id -> its group
        self.dirty: set[_Group] = set()  # balanced: groups some job left since at()
        self.count = 0
        self.requeued = 0  # jobs here that were requeued (order.requeued_last applies)
        self.roots: dict[float, float] = {}  # balanced: time limit -> its square root
        self.restricted = 0  # balanced: jobs here whose request only some GPUs may serve
        self.cpu_only = 0  # jobs here that ask no GPU, only node CPU (fits.cpu_only's test)
        self.no_gpu = 0  # jobs here that ask no GPU (-g 0)
        # guarded: the jobs by (queue time, id), and the GPU-seconds they ask (berth.core.guard)
        # (no set of their ids, no tuple an entry: a queue of 100,000 keeps little but them)
        self.queued: list[Job] | None = [] if policy == "guarded" else None
        self.work = 0.0
        self.areas: dict[float, float] = {}  # guarded: one float for the jobs of one area

    def __len__(self) -> int:
        return self.count

    def has(self, job: Job) -> bool:
        """Whether ``job`` is here (added, not pruned)."""
        if self.dynamic:
            return job.id in self.where
        k = bisect_left(self.keys, order_key(job, self.policy))
        return k < len(self.jobs) and self.jobs[k] is job

    def requests(self) -> list[Request]:
        """What the jobs here ask (balanced: read from the groups, the jobs that left skipped)."""
        if not self.dynamic:
            return [j.request for j in self.jobs]
        where = self.where
        return [
            it[3].request
            for g in self.groups.values()
            for it in itertools.islice(g.items, g.start, None)
            if where.get(it[1]) is g
        ]

    def add(self, job: Job) -> None:
        self.count += 1
        self.requeued += requeued(job)
        self.cpu_only += _cpu_only(job)
        self.no_gpu += job.request.gpus == 0
        if not self.dynamic:
            key = order_key(job, self.policy)
            if self.queued is not None:  # (guarded: its key's area, one float for many)
                if len(self.areas) >= 4096:
                    self.areas.clear()
                key = (key[0], self.areas.setdefault(key[1], key[1]), *key[2:])
            k = bisect_left(self.keys, key)
            self.keys.insert(k, key)
            self.jobs.insert(k, job)
            if self.queued is not None:
                insort(self.queued, job, key=_by_queue)
                self.work += work(job)
            return
        limit = job.time_limit if job.time_limit is not None else UNKNOWN_LIMIT
        root = self.roots.get(limit)
        if root is None:  # (one float for the jobs of one limit: a long queue's memory)
            if len(self.roots) >= 4096:
                self.roots.clear()
            root = self.roots[limit] = math.sqrt(max(limit, 1.0))
        # never left out by narrow(): CPU-only jobs, and jobs whose pass has more to do than
        # start them (a hold, dependencies, a backoff: wait reasons, cancels, wake-ups)
        free = (
            job.request.size < 1e-5 or job.held or bool(job.dependencies)
            or job.not_before is not None
        )  # fmt: skip
        gk = (-job.priority, int(math.log2(root) * 16.0), free)
        g = self.groups.get(gk)
        if g is None:
            g = self.groups[gk] = _Group(gk, -job.priority, free)
        item = (job.queue_time, job.id, root, job, job.request.size, job.time_limit)
        if not g.items or g.items[-1][:2] < item[:2]:
            g.items.append(item)  # the usual case: the newest job
        else:
            _back(g, item)
        g.root = min(g.root, root)
        g.limit = min(g.limit, job.time_limit if job.time_limit is not None else INF)
        gpus = job.request.size
        g.sizes[gpus] = g.sizes.get(gpus, 0) + 1
        if gpus >= 1:
            g.whole = min(g.whole, gpus)
        else:
            g.share = min(g.share, gpus)
        self.where[job.id] = g
        if restricts(job.request):
            self.restricted += 1

    def prune(self, gone: Iterable[Job]) -> None:
        """Forget these jobs (they left the queue: started, cancelled)."""
        for job in gone:
            self.count -= 1
            self.requeued -= requeued(job)
            self.cpu_only -= _cpu_only(job)
            self.no_gpu -= job.request.gpus == 0
            if not self.dynamic:
                k = bisect_left(self.keys, order_key(job, self.policy))
                if k < len(self.jobs) and self.jobs[k] is job:
                    del self.keys[k]
                    del self.jobs[k]
                    if self.queued is not None:
                        q = self.queued
                        i = bisect_left(q, (job.queue_time, job.id), key=_by_queue)
                        if i < len(q) and q[i] is job:
                            del q[i]
                        self.work = self.work - work(job) if q else 0.0
                continue
            g = self.where.pop(job.id, None)
            if g is None:
                continue
            g.dead += 1
            self.dirty.add(g)
            if restricts(job.request):
                self.restricted -= 1
            gpus = job.request.size
            left = g.sizes[gpus] - 1
            if left:
                g.sizes[gpus] = left
            else:  # the last of its size: the smallest sizes may have grown
                del g.sizes[gpus]
                g.whole = min((x for x in g.sizes if x >= 1), default=INF)
                g.share = min((x for x in g.sizes if x < 1), default=INF)
            if g.dead > 32 and 2 * g.dead > len(g.items) - g.start:
                g.items = [it for it in g.items[g.start :] if it[3].state is State.PENDING]
                g.start = g.dead = 0

    def at(self, now: float) -> Sequence[Job]:
        """The jobs in the order of ``order_key(job, policy, now)``: for ``balanced`` a
        :class:`View` that ``schedule()`` walks lazily (valid until the ranking changes)."""
        if not self.dynamic:
            return self.jobs if self.queued is None else Queued(self)
        for g in self.dirty:  # skip what left from the front
            items, i = g.items, g.start
            while i < len(items) and items[i][3].state is not State.PENDING:
                i += 1
            g.dead = max(0, g.dead - (i - g.start))
            g.start = i
            if i == len(items):  # empty: forget it
                del self.groups[g.key]
        self.dirty.clear()
        return View(self, now)


def _by_queue(job: Job) -> tuple[float, int]:
    return (job.queue_time, job.id)


def _cpu_only(job: Job) -> bool:
    r = job.request
    return r.gpus == 0 and bool(r.cpu)


class Queued(Sequence[Job]):
    """A ``guarded`` ranking's jobs in its order, with the same jobs oldest first (the
    overdue job's search, :mod:`berth.core.guard`); valid until the ranking changes."""

    __slots__ = ("ranking",)

    def __init__(self, ranking: Ranking) -> None:
        self.ranking = ranking

    def by_queue(self) -> Iterator[Job]:
        return iter(self.ranking.queued or ())

    @property
    def work(self) -> float:
        """GPU-seconds the jobs ask (their time limits on their GPUs)."""
        return self.ranking.work

    def __iter__(self) -> Iterator[Job]:
        return iter(self.ranking.jobs)

    def __len__(self) -> int:
        return len(self.ranking.jobs)

    @overload
    def __getitem__(self, i: int) -> Job: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Job]: ...
    def __getitem__(self, i: int | slice) -> Job | Sequence[Job]:
        return self.ranking.jobs[i]


class View(Sequence[Job]):
    """A ranking's jobs in ``balanced`` order at ``now``, walked lazily."""

    __slots__ = ("now", "ranking")

    def __init__(self, ranking: Ranking, now: float) -> None:
        self.ranking, self.now = ranking, now

    def walk(self) -> Walk:
        return Walk(self.ranking, self.now)

    def __iter__(self) -> Iterator[Job]:
        return self.walk()

    def __len__(self) -> int:
        return self.ranking.count

    @overload
    def __getitem__(self, i: int) -> Job: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Job]: ...
    def __getitem__(self, i: int | slice) -> Job | Sequence[Job]:
        return list(self.walk())[i]


class Walk(Iterator[Job]):
    """One lazy merge of the groups (module docstring)."""

    __slots__ = (
        "cands", "heads", "narrowed", "now", "reach", "requeued", "shadow", "share",
        "share_all", "whole", "whole_all",
    )  # fmt: skip

    def __init__(self, ranking: Ranking, now: float) -> None:
        self.now = now
        self.requeued = ranking.requeued > 0
        self.narrowed = False
        self.shadow = INF
        self.reach = False
        self.whole, self.share, self.whole_all, self.share_all = 0, 0.0, 0, 0.0
        # (order_key's key..., job, group): the jobs taken out of their groups, exactly
        self.cands: list[tuple[int, float, float, int, Job, _Group]] = []
        # (bound..., next index, group): the oldest's wait over the group's smallest square
        # root bounds every job of the group (order_key's key, with -(x / r) as (-x) / r:
        # the same number). Ids are unique, so neither jobs nor groups are ever compared.
        heads = []
        for g in ranking.groups.values():
            q, jid = g.items[g.start][:2]
            heads.append((g.np, (q - now if now > q else 0.0) / g.root, q, jid, g.start, g))
        heapq.heapify(heads)
        self.heads = heads

    def narrow(
        self, whole: int, share: float, shadow: float, reserved: bool,
        whole_all: int = 2**62, share_all: float = INF,
    ) -> None:  # fmt: skip
        """From now on a job can start only if it is CPU-only, or fits on ``whole`` GPUs or a
        ``share`` of one (outside the reservation), or ends before ``shadow`` (now + limit <=
        shadow < INF, with a reservation) and fits on ``whole_all`` GPUs or a ``share_all``
        of one (all that is free): leave the others out (``schedule()`` would pass them over
        anyway). Each call may only narrow further (capacity only shrinks within a pass)."""
        self.narrowed, self.whole, self.share = True, whole, share
        self.whole_all, self.share_all = whole_all, share_all
        self.shadow, self.reach = shadow, reserved and shadow < INF
        may = self._may
        cands = [c for c in self.cands if c[5].free or may(c[4].request.size, c[4].time_limit)]
        heapq.heapify(cands)
        self.cands = cands
        now, reach = self.now, self.reach
        heads = [  # the groups where some job may start (the same tests, on the group's
            # fewest GPUs, smallest share and shortest limit)
            h for h in self.heads
            if (g := h[5]).free or g.whole <= whole or g.share - EPS <= share
            or (reach and now + g.limit <= shadow
                and (g.whole <= whole_all or g.share - EPS <= share_all))
        ]  # fmt: skip
        heapq.heapify(heads)
        self.heads = heads

    def _may(self, g: float, limit: float | None) -> bool:
        """Whether a job asking ``g`` GPUs with this time limit may still start."""
        if (g <= self.whole) if g >= 1 else (g - EPS <= self.share):
            return True
        if not self.reach or limit is None or self.now + limit > self.shadow:
            return False
        return (g <= self.whole_all) if g >= 1 else (g - EPS <= self.share_all)

    def __next__(self) -> Job:
        heads, cands, now = self.heads, self.cands, self.now
        push, pop, pending = heapq.heappush, heapq.heappop, State.PENDING
        narrowed = self.narrowed
        while heads and (not cands or heads[0] < cands[0]):
            np, _, _, _, i, g = pop(heads)
            items = g.items
            n = len(items)
            if narrowed and not g.free:  # (narrow() left out the groups that cannot start)
                may = self._may
                while i < n and (
                    items[i][3].state is not pending or not may(items[i][4], items[i][5])
                ):
                    i += 1
            else:
                while i < n and items[i][3].state is not pending:
                    i += 1
            if i == n:
                continue
            q, jid, r, job, _, _ = items[i]
            push(cands, (np, (q - now if now > q else 0.0) / r, q, jid, job, g))
            i += 1
            if i < n:
                q = items[i][0]
                push(heads, (np, (q - now if now > q else 0.0) / g.root, q, items[i][1], i, g))
        if not cands:
            raise StopIteration
        return pop(cands)[4]
