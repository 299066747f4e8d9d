"""A requeued attempt queues behind every job that was waiting when it was preempted, in every
policy (issue 10, point 3; mgpu_srun's "context switch": to the end of the queue)."""

from __future__ import annotations

import pytest

from berth.core import POLICIES, Inputs, Job, Request, State, schedule, transition
from berth.core.order import ordered

from .conftest import gpus


def _job(i: int, t: float, **kw: object) -> Job:
    return Job(id=i, submit_time=t, request=Request(gpus=1), **kw)  # type: ignore[arg-type]


def _pass(jobs: list[Job], now: float, policy: str, log: list[int]) -> None:
    pending = [j for j in jobs if j.state is State.PENDING and j.submit_time <= now]
    running = [j for j in jobs if j.state is State.RUNNING]
    d = schedule(Inputs(pending, running, gpus(1), now=now, policy=policy))
    for s in d.starts:
        job = next(j for j in jobs if j.id == s.job_id)
        transition(job, State.RUNNING, now=now, gpus=s.gpus)
        log.append(job.id)


def _finish(job: Job, now: float) -> None:
    transition(job, State.COMPLETED, now=now, exit_code=0)


@pytest.mark.parametrize("policy", POLICIES)
def test_requeued_job_runs_after_the_jobs_that_waited(policy: str) -> None:
    # R is what every policy likes best: highest priority, shortest limit, first tenant.
    r = _job(1, 0.0, requeue=True, time_limit=4.0, priority=5, user="a")
    a = _job(2, 1.0, time_limit=1000.0, user="b")
    b = _job(3, 2.0, time_limit=1000.0, user="b")
    jobs = [r, a, b]
    log: list[int] = []
    _pass(jobs, 0.0, policy, log)
    _pass(jobs, 2.0, policy, log)  # A and B wait behind R
    transition(r, State.TIMEOUT, now=4.0)  # --requeue: PREEMPTED, back to the queue
    assert r.state is State.PENDING and r.queue_time == 4.0
    _pass(jobs, 4.5, policy, log)
    _finish(a, 100.0)
    _pass(jobs, 100.0, policy, log)
    _finish(b, 200.0)
    _pass(jobs, 200.0, policy, log)
    assert log == [1, 2, 3, 1], f"{policy}: start order {log}"


def test_jobs_arriving_after_the_preemption_still_queue_behind_it() -> None:
    """The end of the queue *at the preemption*: not behind every later arrival for ever."""
    r = _job(1, 0.0, requeue=True, time_limit=4.0)
    a = _job(2, 1.0)
    late = _job(3, 5.0)
    jobs = [r, a, late]
    log: list[int] = []
    _pass(jobs, 0.0, "fifo", log)
    transition(r, State.TIMEOUT, now=4.0)
    _pass(jobs, 5.0, "fifo", log)
    _finish(a, 10.0)
    _pass(jobs, 10.0, "fifo", log)
    assert log == [1, 2, 1]


@pytest.mark.parametrize("policy", POLICIES)
def test_order_holds_requeued_jobs_until_their_predecessors_are_out(policy: str) -> None:
    # Two requeued jobs (preempted at 10 and at 20) and three that never ran, submitted at 5,
    # 15 and 30. Every policy favours the requeued ones (priority, limit, tenant).
    def job(i: int, t: float, requeued_at: float | None = None) -> Job:
        j = _job(i, t, time_limit=1.0 if requeued_at else 500.0 + i,
                 priority=9 if requeued_at else 0, user="a" if requeued_at else "b")  # fmt: skip
        if requeued_at is not None:
            transition(j, State.RUNNING, now=t, gpus=(0,))
            transition(j, State.PREEMPTED, now=requeued_at)
        return j

    r1, r2 = job(1, 0.0, requeued_at=10.0), job(2, 1.0, requeued_at=20.0)
    w5, w15, w30 = job(3, 5.0), job(4, 15.0), job(5, 30.0)
    pending = [w30, r2, w15, r1, w5]
    got = [j.id for j in ordered(pending, policy, False, 40.0, {}, None)]
    assert sorted(got) == [1, 2, 3, 4, 5]
    pos = {jid: k for k, jid in enumerate(got)}
    assert pos[3] < pos[1]  # w5 waited when r1 was preempted
    assert pos[3] < pos[2] and pos[4] < pos[2] and pos[1] < pos[2]  # r2: w5, w15, r1 waited
    # w30 came after both preemptions: the policy orders it against them.


def test_no_requeued_job_leaves_the_policy_order_alone() -> None:
    jobs = [_job(i, float(10 - i), time_limit=float(i)) for i in range(1, 8)]
    for policy in POLICIES:
        plain = [j.id for j in ordered(jobs, policy, False, 50.0, {}, None)]
        transition(jobs[0], State.RUNNING, now=50.0, gpus=(0,))
        transition(jobs[0], State.PREEMPTED, now=51.0)  # queue_time 51: last everywhere
        got = [j.id for j in ordered(jobs, policy, False, 52.0, {}, None)]
        assert got[-1] == 1
        if policy != "balanced":  # (balanced's order moves with the clock)
            assert got[:-1] == [i for i in plain if i != 1]
        jobs[0] = _job(1, 9.0, time_limit=1.0)
