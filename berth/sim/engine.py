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
import time
from bisect import bisect_left
from dataclasses import dataclass, field

from berth.core.job import Job, Request
from berth.core.placement import Profile
from berth.core.policy import (
    DEFAULT_PLACEMENT,
    DEFAULT_POLICY,
    DYNAMIC,
    check_policy,
    order_key,
    schedule,
)
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


def simulate(
    jobs: list[SimJob],
    inv: Inventory,
    *,
    policy: str = DEFAULT_POLICY,
    placement: str = DEFAULT_PLACEMENT,
    timeline: bool = True,
) -> RunResult:
    """Replay ``jobs`` (sorted by submit) on ``inv`` under ``policy``; deterministic."""
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
    pos = {j.id: i for i, j in enumerate(jobs)}
    core: dict[int, Job] = {}
    pending: list[Job] = []
    keys: list[tuple[float, ...]] = []
    running: dict[int, Job] = {}
    ends: list[tuple[float, int]] = []
    key_policy = "priority" if policy == "fairshare" else policy
    dynamic = policy in DYNAMIC
    index = {g.index: k for k, g in enumerate(gpus)}
    free = [1.0] * len(gpus)
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
            a = job.attempts[-1]
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
            if dynamic:
                pending.append(job)
            else:
                key = order_key(job, key_policy)
                k = bisect_left(keys, key)
                keys.insert(k, key)
                pending.insert(k, job)
            if placement == "packer":
                recent.append(job.request)
                if arrived % PROFILE_EVERY == 1 or profile is None:
                    del recent[:-PROFILE_WINDOW]
                    profile = Profile.of(recent + [p.request for p in pending[:PROFILE_WINDOW]])
        d = schedule(
            pending, list(running.values()), gpus, None, (), now, policy=policy,
            placement=placement, nodes=nodes, profile=profile, explain=False,
            presorted=not dynamic,
        )  # fmt: skip
        res.passes += 1
        for s in d.starts:
            job = core[s.job_id]
            transition(
                job, State.RUNNING, now=now, gpus=s.gpus, share=s.share, mem=s.mem, node=s.node
            )
            if not dynamic:
                key = order_key(job, key_policy)
                k = bisect_left(keys, key)
                assert pending[k] is job
                del keys[k]
                del pending[k]
            running[job.id] = job
            i = pos[job.id]
            start[i] = now
            res.placed[i] = s.gpus
            sj = jobs[i]
            run = sj.duration if sj.time_limit is None else min(sj.duration, sj.time_limit)
            heapq.heappush(ends, (now + run, job.id))
            for g in s.gpus:
                free[index[g]] -= s.share
            allocated += job.request.gpu_amount
        if dynamic and d.starts:
            pending = [j for j in pending if j.state is State.PENDING]
        if timeline:
            stranded = sum(f for f in free if 1e-9 < f < 1 - 1e-9)
            res.timeline.append((now, len(pending), allocated, stranded))
        if not d.starts and not ends and arrived >= n and pending:
            raise AssertionError(
                f"{len(pending)} jobs can never start (first: job {pending[0].id})"
            )
    res.wall = time.perf_counter() - wall0
    return res
