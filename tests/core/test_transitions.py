from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from berth.core import (
    Dependency,
    IllegalTransition,
    Job,
    Request,
    State,
    hold,
    release,
    transition,
)
from berth.errors import UsageError

MakeJob = Callable[..., Job]


def test_codes_match_slurm() -> None:
    assert [s.code for s in State] == ["PD", "R", "CG", "CD", "F", "CA", "TO", "PR", "LO"]
    assert State.parse("pd") is State.PENDING
    assert State.parse("CANCELLED") is State.CANCELLED
    with pytest.raises(ValueError, match="unknown job state 'XX'"):
        State.parse("XX")


def test_happy_path_records_attempt_and_history(make_job: MakeJob) -> None:
    job = make_job(2)
    transition(job, State.RUNNING, now=10.0, gpus=(0, 1))
    assert job.state is State.RUNNING
    assert job.attempt is not None and job.attempt.gpus == (0, 1) and job.attempt.start == 10.0
    transition(job, State.COMPLETED, now=15.0, exit_code=0)
    assert job.state is State.COMPLETED and job.state.finished
    assert job.attempt.end == 15.0 and job.attempt.outcome is State.COMPLETED
    assert job.exit_code == 0
    assert [(e.prev, e.state) for e in job.history] == [
        (None, State.PENDING),
        (State.PENDING, State.RUNNING),
        (State.RUNNING, State.COMPLETED),
    ]


@pytest.mark.parametrize(
    ("setup", "to"),
    [
        ([], State.COMPLETED),  # never ran
        ([], State.COMPLETING),
        ([State.RUNNING, State.COMPLETED], State.RUNNING),  # finished is final
        ([State.RUNNING, State.FAILED], State.CANCELLED),
        ([State.RUNNING], State.RUNNING),
        ([State.RUNNING, State.CANCELLED], State.PENDING),
    ],
)
def test_illegal_transitions_refused_and_change_nothing(
    make_job: MakeJob, setup: list[State], to: State
) -> None:
    job = make_job(1)
    for st in setup:
        transition(job, st, now=1.0, gpus=(0,) if st is State.RUNNING else ())
    before = job.to_dict()
    with pytest.raises(IllegalTransition, match=f"job {job.id}: cannot go from"):
        transition(job, to, now=2.0, gpus=(0,))
    assert job.to_dict() == before


def test_held_job_cannot_start_until_released(make_job: MakeJob) -> None:
    job = make_job(1)
    hold(job, now=1.0)
    with pytest.raises(IllegalTransition, match="held"):
        transition(job, State.RUNNING, now=2.0, gpus=(0,))
    release(job, now=3.0)
    transition(job, State.RUNNING, now=4.0, gpus=(0,))
    assert [e.detail for e in job.history][1:3] == ["held by user", "released"]


def test_wrong_gpu_count_refused(make_job: MakeJob) -> None:
    job = make_job(2)
    with pytest.raises(IllegalTransition, match="needs 2 GPU"):
        transition(job, State.RUNNING, now=1.0, gpus=(0,))


def test_retries_back_off_exponentially_then_fail(make_job: MakeJob) -> None:
    job = make_job(1, retries=2, retry_delay=10.0)
    transition(job, State.RUNNING, now=0.0, gpus=(0,))
    transition(job, State.FAILED, now=5.0, exit_code=3)
    assert job.state is State.PENDING and job.not_before == 15.0
    with pytest.raises(IllegalTransition, match="backoff"):
        transition(job, State.RUNNING, now=14.0, gpus=(0,))
    transition(job, State.RUNNING, now=15.0, gpus=(1,))
    transition(job, State.FAILED, now=20.0, exit_code=3)
    assert job.state is State.PENDING and job.not_before == 40.0  # 20 s: doubled
    transition(job, State.RUNNING, now=40.0, gpus=(0,))
    transition(job, State.FAILED, now=41.0, exit_code=4)
    assert job.state is State.FAILED and job.exit_code == 4
    assert [a.outcome for a in job.attempts] == [State.FAILED] * 3
    assert [a.number for a in job.attempts] == [1, 2, 3]
    assert job.attempts[1].gpus == (1,)


def test_timeout_with_requeue_is_preempted_and_goes_to_the_end(make_job: MakeJob) -> None:
    job = make_job(1, requeue=True, time_limit=60.0)
    transition(job, State.RUNNING, now=100.0, gpus=(0,))
    assert job.deadline() == 160.0
    transition(job, State.TIMEOUT, now=160.0)
    assert job.state is State.PENDING
    assert job.attempt is not None and job.attempt.outcome is State.PREEMPTED
    assert job.queue_time == 160.0
    codes = [e.state.code for e in job.history]
    assert codes == ["PD", "R", "PR", "PD"]
    # without requeue, TIMEOUT is final
    other = make_job(1, time_limit=60.0)
    transition(other, State.RUNNING, now=0.0, gpus=(0,))
    transition(other, State.COMPLETING, now=60.0, reason="time limit")
    transition(other, State.TIMEOUT, now=61.0)
    assert other.state is State.TIMEOUT


def test_preempted_always_requeues(make_job: MakeJob) -> None:
    job = make_job(1)
    transition(job, State.RUNNING, now=1.0, gpus=(0,))
    transition(job, State.PREEMPTED, now=2.0)
    assert job.state is State.PENDING and len(job.attempts) == 1
    transition(job, State.RUNNING, now=3.0, gpus=(0,))
    assert len(job.attempts) == 2


def test_roundtrip_through_json(make_job: MakeJob) -> None:
    job = make_job(0.5, mem=12 * 1024**3, gpu_ids=(1, 2), prefer=(2,), name="A100",
                   priority=5, time_limit=3600.0, retries=1, user="alice", uid=1000,
                   dependencies=Dependency.parse_list("afterok:1:2,afterany:3"),
                   extra={"argv": ["python", "x.py"]})  # fmt: skip
    transition(job, State.RUNNING, now=1.0, gpus=(2,), share=0.5, mem=12 * 1024**3)
    transition(job, State.FAILED, now=2.0, exit_code=1)
    data = json.loads(json.dumps(job.to_dict()))
    again = Job.from_dict(data)
    assert again == job
    assert again.tenant == "alice"


def test_request_validation() -> None:
    with pytest.raises(UsageError, match=r"1\.5"):
        Request(gpus=1.5)
    with pytest.raises(UsageError, match="-1"):
        Request(gpus=-1)
    with pytest.raises(UsageError, match="allowed only"):
        Request(gpus=3, gpu_ids=(0, 1))
    with pytest.raises(UsageError, match="unknown dependency type 'afterfoo'"):
        Dependency.parse_list("afterfoo:1")
    assert Request(gpus=2.0).gpus == 2 and isinstance(Request(gpus=2.0).gpus, int)


def test_requeue_at_the_time_limit_stops_after_max_requeues() -> None:
    """mgpu_srun's context switch with a bound (issue 27.2): requeued twice, then TIMEOUT."""
    from berth.core.job import Job
    from berth.core.states import State
    from berth.core.transition import requeues_left, transition

    job = Job(id=1, submit_time=0.0, time_limit=10.0, requeue=True, max_requeues=2)
    now = 0.0
    for expected in (State.PENDING, State.PENDING, State.TIMEOUT):
        transition(job, State.RUNNING, now=now, gpus=(0,))
        now += 10
        transition(job, State.TIMEOUT, now=now, reason="time limit")
        assert job.state is expected
    assert [a.outcome for a in job.attempts] == [State.PREEMPTED, State.PREEMPTED, State.TIMEOUT]
    assert requeues_left(job) == 0
    forever = Job(id=2, submit_time=0.0, requeue=True)
    assert requeues_left(forever) is None
    assert Job.from_dict(job.to_dict()).max_requeues == 2
