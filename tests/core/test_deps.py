"""Dependencies as people write them (issue 24.4), evaluated by the pure core: each form,
all of (',') and any of ('?'), singleton, after+MINUTES, a whole array as one alternative, and
what a dependency that can never be met does (cancelled, DependencyNeverSatisfied)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from berth.core import Decisions, Inputs, Job, Reason, State, schedule, transition
from berth.core import deps as d
from berth.dependency import Dependency
from berth.errors import UsageError

from .conftest import gpus

MakeJob = Callable[..., Job]


def _ended(job: Job, state: State) -> Job:
    transition(job, State.RUNNING, now=1.0, gpus=(0,))
    transition(job, state, now=2.0, exit_code=0 if state is State.COMPLETED else 1)
    return job


def _verdict(job: Job, *others: Job, now: float = 0.0) -> str:
    pending = [job, *(o for o in others if o.state is State.PENDING)]
    running = [o for o in others if o.state is State.RUNNING]
    done = {o.id: o.state for o in others if o.state.finished}
    return d.check(job, d.Known(pending, running, done), now)[0]


@pytest.mark.parametrize(
    ("kind", "ended", "verdict"),
    [
        ("afterok", State.COMPLETED, d.OK),
        ("afterok", State.FAILED, d.NEVER),
        ("afterok", State.CANCELLED, d.NEVER),
        ("afterany", State.COMPLETED, d.OK),
        ("afterany", State.TIMEOUT, d.OK),
        ("afternotok", State.FAILED, d.OK),
        ("afternotok", State.CANCELLED, d.OK),
        ("afternotok", State.COMPLETED, d.NEVER),
        ("after", State.COMPLETED, d.OK),
    ],
)
def test_each_kind_once_its_job_ended(
    make_job: MakeJob, kind: str, ended: State, verdict: str
) -> None:
    first = make_job(1)
    job = make_job(1, dependencies=(Dependency(kind, first.id),))
    assert _verdict(job, first) == d.WAIT  # (first is pending)
    assert _verdict(job, _ended(first, ended)) == verdict


def test_after_waits_for_the_start_and_its_minutes(make_job: MakeJob) -> None:
    first = make_job(1)
    job = make_job(1, dependencies=(Dependency("after", first.id, 10),))
    plain = make_job(1, dependencies=(Dependency("after", first.id),))
    assert _verdict(plain, first) == d.WAIT
    transition(first, State.RUNNING, now=100.0, gpus=(0,))
    assert _verdict(plain, first) == d.OK
    known = d.Known([job], [first], {})
    assert d.check(job, known, now=200.0) == (d.WAIT, "waiting for after:1+10", 700.0)
    assert d.check(job, known, now=700.0)[0] == d.OK
    decided = schedule(Inputs([job], [first], gpus(2), now=200.0))
    assert decided.pending[job.id].reason is Reason.DEPENDENCY and decided.wakeup == 700.0


def test_all_of_needs_every_term_and_one_never_dooms_it(make_job: MakeJob) -> None:
    a, b = make_job(1), make_job(1)
    job = make_job(1, dependencies=Dependency.parse_list("afterok:1:2"))
    _ended(a, State.COMPLETED)
    assert _verdict(job, a, b) == d.WAIT
    assert _verdict(job, a, _ended(b, State.FAILED)) == d.NEVER


def test_any_of_needs_one_and_is_never_only_when_none_can(make_job: MakeJob) -> None:
    a, b = make_job(1), make_job(1)
    terms = (Dependency("afterok", a.id), Dependency("afternotok", b.id))
    job = make_job(1, dependencies=terms, dependency_any=True)
    assert _verdict(job, a, b) == d.WAIT
    _ended(a, State.FAILED)  # afterok:1 can no longer be met, afternotok:2 still can
    known = d.Known([job, b], [], {a.id: a.state})
    assert d.check(job, known)[:2] == (d.WAIT, "waiting for any of afternotok:2")
    assert _verdict(job, a, _ended(b, State.FAILED)) == d.OK
    c, e = make_job(1), make_job(1)
    both = make_job(1, dependencies=(Dependency("afterok", c.id), Dependency("afterok", e.id)),
                    dependency_any=True)  # fmt: skip
    verdict, detail, _ = d.check(both, d.Known([both], [], {c.id: State.FAILED,
                                                            e.id: State.CANCELLED}))  # fmt: skip
    assert verdict == d.NEVER and "none of them can be met" in detail and "CANCELLED" in detail


def test_an_array_is_one_alternative_of_all_its_tasks(make_job: MakeJob) -> None:
    """``afterok:A?afterok:B`` with A an array: A counts once all its tasks COMPLETED."""
    tasks = [make_job(1, id=i) for i in (10, 11)]
    other = make_job(1, id=20)
    terms = (*(Dependency("afterok", t.id, array=10) for t in tasks), Dependency("afterok", 20))
    job = make_job(1, id=30, dependencies=terms, dependency_any=True)
    _ended(tasks[0], State.COMPLETED)
    assert _verdict(job, *tasks, other) == d.WAIT  # (one task is not the array)
    _ended(tasks[1], State.COMPLETED)
    assert _verdict(job, *tasks, other) == d.OK
    assert str(terms[0]) == "afterok:10/10" and Dependency.parse_list("afterok:10/10") == terms[:1]


def test_singleton_runs_one_at_a_time_in_submission_order(make_job: MakeJob) -> None:
    one, two, bob, other = (make_job(1, user=u, dependencies=(Dependency("singleton"),))
                            for u in ("ann", "ann", "bob", "ann"))  # fmt: skip
    for job, name in ((one, "sweep"), (two, "sweep"), (bob, "sweep"), (other, "other")):
        job.name = name  # (make_job's name= is the GPU name filter)
    decided = schedule(Inputs([one, two, bob, other], [], gpus(8)))
    assert {s.job_id for s in decided.starts} == {one.id, bob.id, other.id}
    assert decided.pending[two.id].reason is Reason.DEPENDENCY
    assert "job 1 of that name is PENDING" in decided.pending[two.id].detail
    transition(one, State.RUNNING, now=1.0, gpus=(0,))
    assert _verdict(two, one) == d.WAIT
    transition(one, State.COMPLETED, now=2.0, exit_code=0)
    assert _verdict(two, one) == d.OK


def test_a_never_met_dependency_is_cancelled_with_its_reason(make_job: MakeJob) -> None:
    first = make_job(1)
    job = make_job(1, dependencies=(Dependency("afternotok", first.id),))
    gone = make_job(1, dependencies=(Dependency("afterany", 999),))
    out: Decisions = schedule(Inputs([job, gone], [], gpus(2), done={first.id: State.COMPLETED}))
    assert out.pending[job.id].reason is Reason.DEPENDENCY_NEVER
    reasons = {c.job_id: c.reason for c in out.cancels}
    assert reasons == {
        job.id: "dependency never satisfied: afternotok:1: job 1 COMPLETED",
        gone.id: "dependency never satisfied: afterany:999: job 999 does not exist",
    }


def test_terms_round_trip_through_the_store(make_job: MakeJob) -> None:
    terms = Dependency.parse_list("after:3+10,singleton,afterok:13/12,afternotok:4")
    job = make_job(1, dependencies=terms, dependency_any=True)
    back = Job.from_dict(job.to_dict())
    assert back.dependencies == terms and back.dependency_any
    old = {**job.to_dict(), "dependencies": ["afterok:3"]}
    del old["dependency_any"]  # (a row of an earlier daemon)
    assert Job.from_dict(old).dependencies == (Dependency("afterok", 3),)
    with pytest.raises(UsageError, match="minutes go with after only"):
        Dependency("afterok", 3, 5)


def test_a_failed_job_being_retried_is_not_its_dependents_last_word(make_job: MakeJob) -> None:
    """--retry-oom: while it is unknown whether the failed job is queued again, its dependents
    wait; once retried, the retry's end decides (a chain of retries is followed)."""
    first = _ended(make_job(1), State.FAILED)
    ok = make_job(1, dependencies=(Dependency("afterok", first.id),))
    notok = make_job(1, dependencies=(Dependency("afternotok", first.id),))
    done = d.Finished()
    done[first.id] = State.FAILED
    done.retried[first.id] = None  # (the daemon is reading its log)
    assert d.check(ok, d.Known([ok], [], done))[0] == d.WAIT
    assert d.check(notok, d.Known([notok], [], done))[0] == d.WAIT
    retry = make_job(1)
    done.retried[first.id] = retry.id
    assert d.check(ok, d.Known([ok, retry], [], done))[0] == d.WAIT  # the retry is pending
    done[retry.id] = _ended(retry, State.COMPLETED).state
    assert d.check(ok, d.Known([ok], [], done))[0] == d.OK
    assert d.check(notok, d.Known([notok], [], done)) == (
        d.NEVER, f"afternotok:{first.id} (retried as job {retry.id}): job {retry.id} COMPLETED",
        None,
    )  # fmt: skip
    del done.retried[first.id]  # (not retried after all: its own end decides)
    assert d.check(ok, d.Known([ok], [], done))[0] == d.NEVER
    assert d.check(notok, d.Known([notok], [], done))[0] == d.OK
