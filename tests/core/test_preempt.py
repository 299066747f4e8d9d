"""The preemption rule (issue 32.5, berth.core.preempt): only jobs that opted in, only after
their minimum run, at most ``cap`` times, only for a job much shorter than what they have
left, and never past a waiting job it cannot serve."""

from __future__ import annotations

import pytest

from berth.core import Job, Request, State, deps, transition
from berth.core.guard import Met
from berth.core.preempt import PREEMPTED_FOR, Preempt, Rule, preempted, preemptions
from berth.dependency import Dependency
from berth.errors import UsageError

H = 3600.0


def _running(i: int, limit: float, start: float = 0.0, gpus: int = 1, **kw: object) -> Job:
    job = Job(id=i, submit_time=start, time_limit=limit, request=Request(gpus=gpus), **kw)  # type: ignore[arg-type]
    transition(job, State.RUNNING, now=start, gpus=tuple(range(10 * i, 10 * i + gpus)))
    return job


def _waiting(i: int, limit: float, gpus: float = 1, **kw: object) -> Job:
    return Job(id=i, submit_time=0.0, time_limit=limit, request=Request(gpus=gpus), **kw)  # type: ignore[arg-type]


def test_an_opted_in_long_job_is_preempted_for_a_short_one() -> None:
    long = _running(1, 100 * H, requeue=True)
    assert preemptions([_waiting(9, H)], [long], 2 * H, Rule())[0] == [Preempt(1, 9)]


def test_never_a_job_without_requeue() -> None:
    long = _running(1, 100 * H)  # (did not opt in)
    assert preemptions([_waiting(9, H)], [long], 2 * H, Rule())[0] == []


def test_not_before_its_minimum_run() -> None:
    long = _running(1, 100 * H, start=1000.0, requeue=True)
    rule = Rule(min_run=600.0)
    assert preemptions([_waiting(9, H)], [long], 1599.0, rule) == ([], 1600.0)  # (a pass then)
    assert preemptions([_waiting(9, H)], [long], 1600.0, rule)[0] == [Preempt(1, 9)]


def test_at_most_cap_times() -> None:
    job = _running(1, 100 * H, requeue=True)
    for k in range(2):
        t = (2 * k + 1) * H
        assert preemptions([_waiting(9, H)], [job], t, Rule(cap=2))[0] == [Preempt(1, 9)]
        transition(job, State.COMPLETING, now=t, reason=Preempt(1, 9).reason)
        transition(job, State.PREEMPTED, now=t + 60, reason=Preempt(1, 9).reason)
        transition(job, State.RUNNING, now=t + H, gpus=(10,))
    assert preempted(job) == 2
    assert preemptions([_waiting(9, H)], [job], 10 * H, Rule(cap=2))[0] == []
    # (its time limit's requeues are not this rule's)
    assert all(a.reason.startswith(PREEMPTED_FOR) for a in job.attempts[:2])


def test_only_when_what_it_has_left_is_ratio_times_the_waiting_limit() -> None:
    job = _running(1, 10 * H, requeue=True)
    rule = Rule(ratio=8.0)
    assert preemptions([_waiting(9, H)], [job], 2 * H, rule)[0] == [Preempt(1, 9)]  # 8 h left
    assert preemptions([_waiting(9, H)], [job], 2 * H + 1, rule)[0] == []


def test_a_job_told_to_stop_is_not_chosen_again() -> None:
    job = _running(1, 100 * H, requeue=True)
    transition(job, State.COMPLETING, now=H, reason=Preempt(1, 8).reason)
    assert preemptions([_waiting(9, H)], [job], 2 * H, Rule())[0] == []


def test_one_victim_per_waiting_job_the_least_work_lost() -> None:
    old = _running(1, 100 * H, start=0.0, requeue=True)
    new = _running(2, 100 * H, start=5 * H, requeue=True)
    got = preemptions([_waiting(9, H)], [old, new], 6 * H, Rule())[0]
    assert got == [Preempt(2, 9)]
    got = preemptions([_waiting(9, H), _waiting(8, H)], [old, new], 6 * H, Rule())[0]
    assert got == [Preempt(2, 9), Preempt(1, 8)]


def test_stops_at_the_first_waiting_job_it_cannot_serve() -> None:
    """A long job ahead would take the freed GPU: preempting for the short one behind it
    would only swap one long run for another."""
    job = _running(1, 100 * H, requeue=True)
    ahead = _waiting(7, 50 * H)
    assert preemptions([ahead, _waiting(9, H)], [job], 2 * H, Rule())[0] == []
    held = _waiting(6, H, held=True)  # (a held job takes nothing: the next is served)
    assert preemptions([held, _waiting(9, H)], [job], 2 * H, Rule())[0] == [Preempt(1, 9)]


def test_a_job_whose_dependency_is_met_waits_for_gpus_alone() -> None:
    """As ``guarded``'s overdue job (commit 8c54c9b): a job whose dependency is met is
    served like any other, and a long one ahead stops the walk (the freed GPU would go to it);
    one whose dependency is not met takes no GPU and is passed over. The rule skipped every
    job with a dependency: it preempted for the job behind, handing the GPU to the long one."""
    job = _running(1, 100 * H, requeue=True)
    done = _running(5, H)  # (what the waiting jobs depend on)

    def after(i: int, limit: float) -> Job:
        w = _waiting(i, limit)
        w.dependencies = (Dependency("afterok", 5),)
        return w

    def met(waiting: list[Job]) -> Met:
        return deps.Lazy(waiting, [job, done], None, 2 * H).met

    transition(done, State.COMPLETED, now=H, exit_code=0)
    ahead, behind = after(7, 50 * H), _waiting(9, H)
    assert preemptions([ahead, behind], [job], 2 * H, Rule(), met([ahead, behind]))[0] == []
    short = after(8, H)
    assert preemptions([short], [job], 2 * H, Rule(), met([short]))[0] == [Preempt(1, 8)]
    done.attempts.clear()  # (job 5 pending again: the dependency not met)
    done.state = State.PENDING
    waiting = [after(7, 50 * H), _waiting(9, H)]
    assert preemptions(waiting, [job], 2 * H, Rule(), met([*waiting, done]))[0] == [Preempt(1, 9)]


def test_never_for_a_lower_priority_nor_a_job_bigger_than_the_victim() -> None:
    job = _running(1, 100 * H, requeue=True, priority=5)
    assert preemptions([_waiting(9, H)], [job], 2 * H, Rule())[0] == []
    small = _running(2, 100 * H, requeue=True)
    assert preemptions([_waiting(9, H, gpus=2)], [small], 2 * H, Rule())[0] == []
    assert preemptions([_waiting(9, H, gpus=0.5)], [small], 2 * H, Rule())[0] == []
    shared = Job(id=3, submit_time=0.0, time_limit=100 * H, request=Request(gpus=0.5),
                 requeue=True)  # fmt: skip
    transition(shared, State.RUNNING, now=0.0, gpus=(30,), share=0.5)
    assert preemptions([_waiting(9, H)], [shared], 2 * H, Rule())[0] == []


@pytest.mark.parametrize(
    "kw", [{"ratio": 0.5}, {"min_run": -1.0}, {"grace": float("nan")}, {"cap": -1}, {"scan": 0}]
)
def test_a_bad_rule_is_refused_by_name(kw: dict[str, float]) -> None:
    with pytest.raises(UsageError, match=next(iter(kw))):
        Rule(**kw)  # type: ignore[arg-type]
