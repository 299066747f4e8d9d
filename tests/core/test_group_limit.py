"""At most K jobs of a group running at once (an array's %K): the pure core's constraint
(berth/core/groups.py), the same in the daemon and the simulator."""

from __future__ import annotations

from collections.abc import Callable

from berth.core import Inputs, Job, Reason, State, schedule, transition
from berth.core.policy import POLICIES

from .conftest import gpus

MakeJob = Callable[..., Job]


def _start(jobs: list[Job], now: float = 0.0) -> set[int]:
    pending = [j for j in jobs if j.state is State.PENDING]
    running = [j for j in jobs if j.state is State.RUNNING]
    d = schedule(Inputs(pending, running, gpus(8), now=now))
    by_id = {j.id: j for j in jobs}
    for s in d.starts:
        transition(by_id[s.job_id], State.RUNNING, now=now, gpus=s.gpus, share=s.share)
    return {s.job_id for s in d.starts}


def test_a_group_never_runs_more_than_its_limit_and_others_pass_it(make_job: MakeJob) -> None:
    tasks = [make_job(1, group="array:1", group_limit=2) for _ in range(6)]
    other = make_job(1, priority=-5)  # after the tasks in the order, not held by their limit
    jobs = [*tasks, other]
    assert _start(jobs) == {tasks[0].id, tasks[1].id, other.id}  # 8 GPUs, yet only 2 tasks
    pending = [j for j in jobs if j.state is State.PENDING]
    running = [j for j in jobs if j.state is State.RUNNING]
    d = schedule(Inputs(pending, running, gpus(8), now=1.0))
    assert not d.starts
    for t in tasks[2:]:
        assert d.pending[t.id].reason is Reason.ARRAY_TASK_LIMIT
        assert "2 of array:1 running, at most 2 at once" in d.pending[t.id].detail
    transition(tasks[0], State.COMPLETED, now=2.0, exit_code=0)  # one ends: one more starts
    assert _start(jobs, now=2.0) == {tasks[2].id}


def test_every_policy_and_a_pass_without_explanations_keep_the_limit(make_job: MakeJob) -> None:
    for policy in POLICIES:
        tasks = [make_job(0.5, group="g", group_limit=3, time_limit=60.0) for _ in range(10)]
        for explain in (True, False):
            d = schedule(Inputs(tasks, [], gpus(8), policy=policy, explain=explain))
            assert len(d.starts) == 3, (policy, explain)


def test_a_throttled_head_takes_no_reservation(make_job: MakeJob) -> None:
    running = make_job(1, group="g", group_limit=1)
    transition(running, State.RUNNING, now=0.0, gpus=(0,), share=1.0)
    throttled = make_job(1, group="g", group_limit=1)
    big = make_job(1)  # fits on GPU 1: the throttled job ahead of it must not block it
    d = schedule(Inputs([throttled, big], [running], gpus(2), policy="fifo"))
    assert {s.job_id for s in d.starts} == {big.id}
    assert d.pending[throttled.id].reason is Reason.ARRAY_TASK_LIMIT


def test_old_rows_load_without_a_group(make_job: MakeJob) -> None:
    row = make_job(1).to_dict()
    del row["group"], row["group_limit"]
    job = Job.from_dict(row)
    assert (job.group, job.group_limit) == ("", 0)
    assert Job.from_dict(make_job(1, group="a", group_limit=4).to_dict()).group_limit == 4
