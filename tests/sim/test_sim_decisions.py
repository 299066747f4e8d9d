"""The simulator's shortcuts change no decision (issue 10, point 7).

The simulator keeps the running jobs' capacity across passes (``Occupancy``), keeps the queue
in order across passes (``Ranking``), sorts nothing when every GPU is taken, and the pass passes
over jobs that cannot start without trying to place them. Here a reference replays the same
workloads the slow way -- every pass builds its capacity from the inventory, charges every
running job, sorts the whole queue and explains every pending job, as the daemon's explaining
pass does -- and every start time and every GPU must come out the same.
"""

from __future__ import annotations

import copy
import heapq
import random
from pathlib import Path

import pytest

from berth.core import Inputs, Job, Request, State, schedule, transition
from berth.core.capacity import Capacity
from berth.core.guard import Arrivals, first, overdue_in
from berth.core.occupancy import Occupancy
from berth.core.order import order_key
from berth.core.placement import Profile
from berth.core.policy import POLICIES
from berth.core.preempt import Rule, preemptions
from berth.core.ranking import Ranking
from berth.sim import engine, workload
from berth.sim.engine import PROFILE_EVERY, PROFILE_WINDOW, simulate
from berth.sim.run import prepare
from berth.sim.traces import SimJob

DATA = Path(__file__).parent / "data"


def reference(
    jobs: list[SimJob], inv: workload.Inventory, policy: str, placement: str,
    rule: Rule | None = None,
) -> tuple[list[float], list[tuple[int, ...]]]:  # fmt: skip
    """Start times and GPUs of every job, one fully explaining pass per event (``rule``: and
    the preemption rule after each pass, on the whole queue sorted anew)."""
    gpus, nodes = inv
    n = len(jobs)
    start = [-1.0] * n
    placed: list[tuple[int, ...]] = [()] * n
    pos = {j.id: i for i, j in enumerate(jobs)}
    pending: list[Job] = []  # in arrival order
    running: dict[int, Job] = {}
    ends: list[tuple[float, int]] = []
    due: dict[int, float] = {}  # (preemption) each running job's end in ``ends``
    stopping: dict[int, tuple[float, str]] = {}  # (preemption) told to stop: when, why
    recent: list[Request] = []
    profile: Profile | None = None
    stale = False  # the profile is to be built again at the next pass
    arrived = 0
    arrivals = Arrivals()  # guarded: the work that joined the queue, as the simulator keeps it
    key_policy = "priority" if policy == "fairshare" else policy
    while arrived < n or ends:
        t_arr = jobs[arrived].submit if arrived < n else float("inf")
        now = min(t_arr, ends[0][0]) if ends else t_arr
        while ends and ends[0][0] <= now:
            t, jid = heapq.heappop(ends)
            if rule is not None:
                if due.get(jid) != t:
                    continue  # (stale: replaced by a stop)
                del due[jid]
            job = running.pop(jid)
            stop = stopping.pop(jid, None)
            if stop is not None and stop[0] == t:
                queued = job.queue_time
                transition(job, State.PREEMPTED, now=now, reason=stop[1])
                job.queue_time = queued  # (its place kept)
                pending.append(job)
                continue
            sj = jobs[pos[job.id]]
            timed_out = sj.time_limit is not None and sj.time_limit < sj.duration
            transition(job, State.TIMEOUT if timed_out else State.COMPLETED, now=now,
                       exit_code=None if timed_out else 0)  # fmt: skip
        while arrived < n and jobs[arrived].submit <= now:
            sj = jobs[arrived]
            arrived += 1
            job = Job(
                id=sj.id, submit_time=sj.submit, tenant=sj.tenant or "-", priority=sj.priority,
                time_limit=sj.time_limit, requeue=sj.requeue, max_requeues=0,
                request=Request(gpus=sj.gpus, mem=sj.mem, gpu_ids=sj.gpu_ids, cpu=sj.cpu, ram=sj.ram),
            )  # fmt: skip
            pending.append(job)
            arrivals.add(job)
            if placement == "packer":  # the simulator's demand profile, as it builds it
                recent.append(job.request)
                if arrived <= PROFILE_EVERY or arrived % PROFILE_EVERY == 1:
                    del recent[:-PROFILE_WINDOW]
                    stale = True  # (built at the pass, once this time's arrivals are in)
        if stale:
            stale = False
            head = (
                pending
                if policy == "balanced"
                else sorted(pending, key=lambda j: order_key(j, key_policy))
            )
            profile = Profile.of(recent + [p.request for p in head[:PROFILE_WINDOW]])
        d = schedule(Inputs(
            pending, list(running.values()), gpus, None, (), now, policy=policy,
            placement=placement, nodes=nodes, profile=profile, explain=True, arrivals=arrivals,
        ))  # fmt: skip
        for s in d.starts:
            job = next(j for j in pending if j.id == s.job_id)
            transition(job, State.RUNNING, now=now, gpus=s.gpus, share=s.share, mem=s.mem,
                       node=s.node)  # fmt: skip
            running[job.id] = job
            i = pos[job.id]
            start[i], placed[i] = now, s.gpus
            sj = jobs[i]
            run = sj.duration if sj.time_limit is None else min(sj.duration, sj.time_limit)
            heapq.heappush(ends, (now + run, job.id))
            due[job.id] = now + run
        pending = [j for j in pending if j.state is State.PENDING]
        if rule is not None and pending:
            order = sorted(pending, key=lambda j: order_key(j, key_policy, now))
            head = None
            if policy == "guarded":
                head = overdue_in(pending, list(running.values()), now, arrivals)
            todo, ready = preemptions(first(order, head), list(running.values()), now, rule)
            if ready is not None:
                heapq.heappush(ends, (ready, -1))  # (a pass at a victim's minimum run)
            for p in todo:
                job = running[p.job_id]
                transition(job, State.COMPLETING, now=now, reason=p.reason)
                stopping[job.id] = (now + rule.grace, p.reason)
                if now + rule.grace < due[job.id]:
                    due[job.id] = now + rule.grace
                    heapq.heappush(ends, (now + rule.grace, job.id))
    return start, placed


def _synthetic(n: int, seed: int) -> list[SimJob]:
    """Whole and fractional jobs, some bigger than a node, priorities, tenants, at load > 1."""
    rng = random.Random(seed)
    out = []
    t = 0.0
    for i in range(1, n + 1):
        g = rng.choice((1, 1, 1, 2, 3, 4, 8, 12, 0.5, 0.25, 0.75))
        d = rng.expovariate(1 / 3000.0) + 1
        out.append(SimJob(i, t, d, float(g), f"t{i % 3}", priority=rng.choice((0, 0, 0, 5))))
        t += rng.expovariate(1 / 300.0)
    return workload.time_limits(out, "round")


CASES = {
    "philly-2x4": lambda: prepare(str(DATA / "philly_head300.csv"), inventory="2x4", load=1.1),
    "itp-8": lambda: prepare(str(DATA / "itp_cluster10.csv"), inventory="8", load=1.2),
    "openb-nodes": lambda: prepare(
        str(DATA / "openb_gpuspec33_excerpt.csv"),
        inventory=str(DATA / "openb_nodes_excerpt.csv"),
        poisson=300,
        load=1.3,
        seed=2,
    ),
}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_same_decisions_as_the_slow_way(case: str, policy: str) -> None:
    wl = CASES[case]()
    res = simulate(copy.deepcopy(wl.jobs), wl.inv, policy=policy)
    start, placed = reference(copy.deepcopy(wl.jobs), wl.inv, policy, "packer")
    assert res.start == start
    assert res.placed == placed


@pytest.mark.parametrize("placement", ["first-fit", "best-fit", "packer"])
@pytest.mark.parametrize("policy", ["balanced", "fifo-backfill", "fairshare"])
def test_same_decisions_on_mixed_sizes_across_nodes(policy: str, placement: str) -> None:
    jobs = _synthetic(400, seed=11)
    inv = workload.inventory("3x4")
    res = simulate(copy.deepcopy(jobs), inv, policy=policy, placement=placement)
    start, placed = reference(copy.deepcopy(jobs), inv, policy, placement)
    assert res.start == start
    assert res.placed == placed


def test_a_pass_does_not_rebuild_capacity_or_sort_the_whole_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The work that made long queues slow: a Capacity built (and every running job charged)
    for every pass, and balanced's whole queue sorted by order_key every pass."""
    jobs = _synthetic(600, seed=5)
    built = {"capacity": 0, "order_key": 0}
    real_init = Capacity.__init__

    def counting_init(self: Capacity, *a: object, **k: object) -> None:
        built["capacity"] += 1
        real_init(self, *a, **k)  # type: ignore[arg-type]

    def counting_key(job: Job, policy: str, now: float = 0.0) -> tuple[float, ...]:
        built["order_key"] += 1
        return order_key(job, policy, now)

    monkeypatch.setattr(Capacity, "__init__", counting_init)
    monkeypatch.setattr("berth.core.order.order_key", counting_key)
    res = simulate(jobs, workload.inventory("3x4"), policy="balanced")
    assert res.passes > 500
    assert built["capacity"] <= 2  # the simulator's Occupancy, once
    assert built["order_key"] == 0  # Ranking keeps the order; nothing sorts it by order_key


def test_occupancy_matches_a_fresh_capacity_bit_for_bit() -> None:
    """Fractional shares: adding back what a job took would round differently."""
    gpus, nodes = workload.inventory("2x2:16G")
    rng = random.Random(3)
    occ = Occupancy(gpus, nodes)
    running: list[Job] = []
    for i in range(1, 400):
        if running and rng.random() < 0.45:
            job = running.pop(rng.randrange(len(running)))
            transition(job, State.COMPLETED, now=float(i), exit_code=0)
            occ.end(job)
        else:
            share = rng.choice((0.1, 0.2, 0.3, 0.47, 0.33, 0.01))
            g = rng.randrange(4)
            fresh = Capacity(gpus, nodes)
            for j in running:
                a = j.attempt
                assert a is not None
                fresh.take_gpus(a.gpus, a.share, a.mem, a.node)
            if fresh.free[g] < share:
                continue
            job = Job(id=i, submit_time=float(i), request=Request(gpus=share))
            transition(job, State.RUNNING, now=float(i), gpus=(g,), share=share)
            occ.start(job)
            running.append(job)
        fresh = Capacity(gpus, nodes)
        for j in running:
            a = j.attempt
            assert a is not None
            fresh.take_gpus(a.gpus, a.share, a.mem, a.node)
        got = occ.capacity()
        assert got.free == fresh.free and got.mem_free == fresh.mem_free
        assert (got.n_whole_free, got.node_whole) == (fresh.n_whole_free, fresh.node_whole)


def test_ranking_is_the_sorted_order() -> None:
    rng = random.Random(4)
    for policy in POLICIES:
        ranking = Ranking(policy)
        jobs = []
        for i in range(1, 300):
            limit = rng.choice((None, 60.0, 3600.0, rng.uniform(1, 1e5)))
            job = Job(id=i, submit_time=float(rng.randrange(100)), time_limit=limit,
                      priority=rng.choice((0, 1, 5)), tenant=f"t{i % 4}")  # fmt: skip
            jobs.append(job)
            ranking.add(job)
        gone = jobs[::7]
        for j in gone:
            transition(j, State.RUNNING, now=200.0, gpus=(0,))
        ranking.prune(gone)
        left = [j for j in jobs if j.state is State.PENDING]
        key_policy = "priority" if policy == "fairshare" else policy
        for now in (150.0, 500.0, 10_000.0):
            want = sorted(left, key=lambda j: order_key(j, key_policy, now))
            assert list(ranking.at(now)) == want
        assert len(ranking) == len(left)


def test_the_engine_uses_them() -> None:
    assert engine.Occupancy is Occupancy and engine.Ranking is Ranking


def test_ranking_forgets_started_jobs_at_the_front_of_its_groups() -> None:
    """A walk opens a group from its oldest job: a started job left there would make every
    pass look through the group again (the order stays right, the speed does not)."""
    ranking = Ranking("balanced")
    jobs = [Job(id=i, submit_time=float(i), time_limit=100.0) for i in range(1, 50)]
    for j in jobs:
        ranking.add(j)
    for j in jobs[:30]:
        transition(j, State.RUNNING, now=60.0, gpus=(0,))
    ranking.prune(jobs[:30])
    assert [j.id for j in ranking.at(70.0)] == list(range(31, 50))
    for g in ranking.groups.values():
        assert g.items[g.start][3].state is State.PENDING


@pytest.mark.parametrize("policy", ["guarded", "sjf", "balanced"])
def test_same_decisions_with_preemption(policy: str) -> None:
    """Issue 32.5: the simulator applies the preemption rule (its order kept, its stale ends
    left in the heap) exactly as the slow way does."""
    jobs = _synthetic(400, seed=7)
    rng = random.Random(7)
    for j in jobs:
        j.requeue = rng.random() < 0.5
    inv = workload.inventory("3x4")
    rule = Rule(ratio=3.0, min_run=300.0, cap=2, grace=30.0)
    res = simulate(copy.deepcopy(jobs), inv, policy=policy, preempt=rule)
    start, placed = reference(copy.deepcopy(jobs), inv, policy, "packer", rule)
    assert res.preemptions >= 5  # (the rule had work to do)
    assert res.start == start
    assert res.placed == placed


@pytest.mark.parametrize("policy", POLICIES)
def test_ranking_takes_back_a_job_with_its_old_queue_time(policy: str) -> None:
    """A preempted job rejoins keeping its place (issue 32.5): its entry, left behind when it
    started, must not make it appear twice, nor hide it before where a walk begins."""
    ranking = Ranking(policy)
    jobs = [Job(id=i, submit_time=float(i), time_limit=100.0 * (i % 3 + 1)) for i in range(1, 80)]
    for j in jobs:
        ranking.add(j)
    gone = jobs[:40]
    for j in gone:
        transition(j, State.RUNNING, now=100.0, gpus=(0,))
    ranking.prune(gone)
    list(ranking.at(110.0))  # (a pass: the groups skip what left from their front)
    back = [jobs[3], jobs[25], jobs[39]]
    for j in back:
        queued = j.queue_time
        transition(j, State.PREEMPTED, now=120.0)
        j.queue_time = queued
        ranking.add(j)
    left = [j for j in jobs if j.state is State.PENDING]
    key_policy = "priority" if policy == "fairshare" else policy
    for now in (130.0, 5000.0):
        want = sorted(left, key=lambda j: order_key(j, key_policy, now))
        assert [j.id for j in ranking.at(now)] == [j.id for j in want]
    assert len(ranking) == len(left)
