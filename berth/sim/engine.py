"""The discrete-event simulator: a virtual clock driving ``berth.core.schedule``.

Events are job arrivals (a sorted list) and job ends (a heap). All events at one instant are
applied, then ONE scheduling pass runs -- the very ``schedule()`` the daemon calls, with the
same ``Job`` objects and ``transition()`` -- and its starts schedule their ends. Nothing runs
between events, so a replay costs (events x one pass), not (simulated seconds).

For speed the simulator keeps the pending list in the policy's order (``presorted=True``) and
asks for no explanations (``explain=False``), which lets a pass stop as soon as nothing more
can fit; neither changes what starts.
"""

from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass, field

from berth.core.fairshare import DEFAULT_HALF_LIFE, Book, FairShare, usage_at
from berth.core.job import Job, Request
from berth.core.occupancy import Occupancy
from berth.core.placement import Profile
from berth.core.policy import DEFAULT_PLACEMENT, DEFAULT_POLICY, check_policy, schedule
from berth.core.ranking import Ranking
from berth.core.states import State
from berth.core.transition import transition
from berth.errors import UsageError
from berth.sim.traces import SimJob
from berth.sim.workload import Inventory

PROFILE_WINDOW = 1000  # the packer's demand profile: the last N arrivals plus the queue
PROFILE_EVERY = 100  # rebuilt every N arrivals


@dataclass(slots=True)
class RunResult:
    """What happened to every job (``start[i]``/``end[i]`` for ``jobs[i]``) and the timeline
    ``(t, queued, allocated GPUs, free share stranded on partly used GPUs)`` after each pass."""

    policy: str
    placement: str
    capacity: int
    jobs: list[SimJob]
    start: list[float]
    end: list[float]
    placed: list[tuple[int, ...]] = field(default_factory=list)
    timeline: list[tuple[float, int, float, float]] = field(default_factory=list)
    passes: int = 0
    wall: float = 0.0
    timeouts: int = 0
    fairshare: bool = False


def simulate(
    jobs: list[SimJob],
    inv: Inventory,
    *,
    policy: str = DEFAULT_POLICY,
    placement: str = DEFAULT_PLACEMENT,
    timeline: bool = True,
    fairshare: bool = False,
    half_life: float = DEFAULT_HALF_LIFE,
) -> RunResult:
    """Replay ``jobs`` (sorted by submit) on ``inv`` under ``policy``; deterministic.
    ``fairshare``: with fair share between tenants by decayed usage, as the system daemon
    (:mod:`berth.core.fairshare`; usage halves every ``half_life`` seconds)."""
    check_policy(policy, placement)
    gpus, nodes = inv
    too_big = [j for j in jobs if j.gpus > len(gpus)]
    if too_big:
        raise UsageError(
            f"job {too_big[0].id} needs {too_big[0].gpus:g} GPUs but the inventory has "
            f"{len(gpus)}: drop such jobs first (berth simulate does)"
        )
    wall0 = time.perf_counter()
    n = len(jobs)
    start = [-1.0] * n
    end = [-1.0] * n
    res = RunResult(policy, placement, len(gpus), jobs, start, end, [()] * n)
    res.fairshare = fairshare
    book = Book(half_life) if fairshare else None  # each tenant's usage of ended jobs
    pos = {j.id: i for i, j in enumerate(jobs)}
    core: dict[int, Job] = {}
    queue = Ranking(policy)  # the pending jobs, in the policy's order
    waiting: dict[int, Job] = {}  # the pending jobs, in arrival order
    running: dict[int, Job] = {}
    held = Occupancy(gpus, nodes)  # what the running jobs hold, kept across passes
    ends: list[tuple[float, int]] = []
    free = [1.0] * len(gpus)
    index = {g.index: k for k, g in enumerate(gpus)}
    allocated = 0.0
    recent: list[Request] = []
    profile: Profile | None = None
    arrived = 0
    while arrived < n or ends:
        t_arr = jobs[arrived].submit if arrived < n else float("inf")
        now = min(t_arr, ends[0][0]) if ends else t_arr
        while ends and ends[0][0] <= now:
            _, jid = heapq.heappop(ends)
            job = running.pop(jid)
            i = pos[jid]
            sj = jobs[i]
            timed_out = sj.time_limit is not None and sj.time_limit < sj.duration
            transition(job, State.TIMEOUT if timed_out else State.COMPLETED, now=now,
                       exit_code=None if timed_out else 0)  # fmt: skip
            res.timeouts += timed_out
            if end[i] >= 0:
                raise AssertionError(f"job {jid} finished twice")
            end[i] = now
            held.end(job)
            a = job.attempts[-1]
            if book is not None:
                book.add(job.tenant, job.request.gpu_amount, a.start, now, now)
            for g in a.gpus:
                free[index[g]] += a.share
            allocated -= job.request.gpu_amount
        while arrived < n and jobs[arrived].submit <= now:
            sj = jobs[arrived]
            arrived += 1
            job = Job(
                id=sj.id, submit_time=sj.submit, name=sj.name, tenant=sj.tenant or "-",
                priority=sj.priority, time_limit=sj.time_limit,
                request=Request(gpus=sj.gpus, mem=sj.mem, gpu_ids=sj.gpu_ids, cpu=sj.cpu, ram=sj.ram),
            )  # fmt: skip
            core[sj.id] = job
            queue.add(job)
            waiting[job.id] = job
            if placement == "packer":
                recent.append(job.request)
                if arrived % PROFILE_EVERY == 1 or profile is None:
                    del recent[:-PROFILE_WINDOW]
                    profile = Profile.of(recent + [p.request for p in _first(queue, waiting)])
        # Every GPU taken: the pass can start nothing, so it needs no queue (a share of 1e-9
        # is far below what schedule() counts as free, 1e-6).
        full = max(free, default=0.0) <= 1e-9
        fair = None
        if book is not None and not full:
            fair = FairShare(usage_at(book, running.values(), now))
        d = schedule(
            [] if full else queue.at(now), list(running.values()), gpus, None, (), now,
            policy=policy, placement=placement, nodes=nodes, profile=profile, explain=False,
            presorted=True, capacity=held.capacity(), fair=fair,
        )  # fmt: skip
        res.passes += 1
        started = []
        for s in d.starts:
            job = core[s.job_id]
            transition(
                job, State.RUNNING, now=now, gpus=s.gpus, share=s.share, mem=s.mem, node=s.node
            )
            started.append(job)
            del waiting[job.id]
            running[job.id] = job
            held.start(job)
            i = pos[job.id]
            start[i] = now
            res.placed[i] = s.gpus
            sj = jobs[i]
            run = sj.duration if sj.time_limit is None else min(sj.duration, sj.time_limit)
            heapq.heappush(ends, (now + run, job.id))
            for g in s.gpus:
                free[index[g]] -= s.share
            allocated += job.request.gpu_amount
        if started:
            queue.prune(started)
        if timeline:
            stranded = sum(f for f in free if 1e-9 < f < 1 - 1e-9)
            res.timeline.append((now, len(queue), allocated, stranded))
        if not d.starts and not ends and arrived >= n and len(queue):
            raise AssertionError(
                f"{len(queue)} jobs can never start (first: job {queue.at(now)[0].id})"
            )
    res.wall = time.perf_counter() - wall0
    return res


def _first(queue: Ranking, waiting: dict[int, Job]) -> list[Job]:
    """The packer's view of the queue: its first ``PROFILE_WINDOW`` jobs, in the policy's order
    (kept sorted), or, for ``balanced`` (whose order moves), in arrival order."""
    if not queue.dynamic:
        return queue.jobs[:PROFILE_WINDOW]
    return list(itertools.islice(waiting.values(), PROFILE_WINDOW))
