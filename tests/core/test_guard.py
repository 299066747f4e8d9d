"""``guarded``'s wait guarantee (issue 32.1, :mod:`berth.core.guard`; the default policy):
smallest GPU-area first, except the oldest job once the work queued after it is 1.6x the work
left (1.3x once it has waited twice the longest wait of a started job): it goes first and
holds the EASY reservation, so short jobs stop passing it."""

from __future__ import annotations

from collections.abc import Callable

from berth.core import Inputs, Job, Reason, State, schedule, transition
from berth.core.guard import EARLY, GUARD, RECORD, Arrivals, overdue, work

from .conftest import gpus

MakeJob = Callable[..., Job]
H = 3600.0


def _scene(make_job: MakeJob) -> tuple[Job, list[Job], list[Job]]:
    """2 GPUs, each held by a job ending at 1 h and 2 h; pending: a 2-GPU 10-h job queued
    first, then five 1-GPU 1-h jobs."""
    running = []
    for k, end in enumerate((H, 2 * H)):
        r = make_job(1, time_limit=end, t=0.0)
        transition(r, State.RUNNING, now=0.0, gpus=(k,))
        running.append(r)
    wide = make_job(2, time_limit=10 * H, t=10.0)
    short = [make_job(1, time_limit=H, t=20.0 + k) for k in range(5)]
    return wide, short, running


def _arrivals(jobs: list[Job], extra: float) -> Arrivals:
    """Every job's arrival, and ``extra`` GPU-seconds of jobs that came after them all and
    ended (the simulator's record; the pass never sees those jobs)."""
    a = Arrivals()
    for j in sorted(jobs, key=lambda j: j.queue_time):
        a.add(j)
    if extra:
        a.add(Job(id=999, submit_time=100.0, time_limit=extra))
    return a


def test_the_overdue_job_goes_first_and_holds_the_reservation(make_job: MakeJob) -> None:
    wide, short, running = _scene(make_job)
    pending = [wide, *short]
    left = sum(map(work, pending)) + H + 2 * H - 2 * 10.0  # the running jobs' rest at 10 s
    now = 10.0 + 1
    # not overdue yet: the work after it (5 GPU-h) is far below 1.6x the work left (28 GPU-h)
    d = schedule(Inputs(pending, running, gpus(2), now=now, policy="guarded",
                        arrivals=_arrivals([*running, *pending], 0.0)))  # fmt: skip
    assert list(d.expected) == [short[0].id]  # as sjf: the first short job reserves GPU 0
    assert d.order[:2] == [short[0].id, short[1].id]
    # overdue: 40 GPU-h of jobs came after it and ended (5 + 40 >= 1.6 x 28)
    d = schedule(Inputs(pending, running, gpus(2), now=now, policy="guarded",
                        arrivals=_arrivals([*running, *pending], 40 * H)))  # fmt: skip
    assert d.order[0] == wide.id
    assert d.expected == {wide.id: 2 * H}  # both GPUs, when the second running job ends
    assert left * GUARD <= 45 * H


def test_without_a_record_of_arrivals_the_visible_jobs_count(make_job: MakeJob) -> None:
    """The daemon's pass has no record of arrivals: only the jobs it sees are counted, which
    can make a job overdue later, never sooner."""
    wide, short, running = _scene(make_job)
    d = schedule(Inputs([wide, *short], running, gpus(2), now=11.0, policy="guarded"))
    assert d.order[0] == short[0].id
    many = [make_job(1, time_limit=8 * H, t=30.0 + k) for k in range(8)]  # 64 GPU-h after it
    pending = [wide, *short, *many]
    assert overdue(iter(sorted(pending, key=lambda j: j.queue_time)),
                   sum(map(work, pending)), 3 * H, 11.0, None, (*pending, *running)) is None  # fmt: skip


def test_a_held_job_is_never_the_overdue_one(make_job: MakeJob) -> None:
    wide, short, running = _scene(make_job)
    wide.held = True
    pending = [wide, *short]
    arrivals = _arrivals([*running, *pending], 100 * H)
    head = overdue(iter(pending), sum(map(work, pending)), 3 * H, 11.0, arrivals)
    assert head is short[0]  # the oldest that may start: it goes first
    d = schedule(Inputs(pending, running, gpus(2), now=11.0, policy="guarded",
                        arrivals=arrivals))  # fmt: skip
    assert wide.id not in d.expected and d.pending[wide.id].reason is Reason.HELD


def test_a_wait_twice_the_longest_makes_the_job_overdue_sooner(make_job: MakeJob) -> None:
    """Between 1.3x and 1.6x the work left, the oldest job is overdue only once it has waited
    twice the longest wait of a job started so far; that record outlives the job that set it
    (kept in ``Arrivals``)."""
    wide, short, _ = _scene(make_job)
    slow = make_job(1, time_limit=10 * H, t=0.0)  # waited 100 s before it started
    transition(slow, State.RUNNING, now=100.0, gpus=(0,))
    other = make_job(1, time_limit=10 * H, t=0.0)
    transition(other, State.RUNNING, now=0.0, gpus=(1,))
    pending = [wide, *short]
    arrivals = _arrivals([slow, other, *pending], 0.0)
    before = 10.0 + RECORD * 100.0 - 1  # the wide job (queued at 10 s) has waited 199 s
    left = sum(map(work, pending)) + 2 * (10 * H) - (before - 100.0) - before
    extra = 1.45 * left - 5 * H  # the work after it: 1.45x the work left, between the two
    assert EARLY * left < 5 * H + extra < GUARD * left
    arrivals.add(Job(id=999, submit_time=50.0, time_limit=extra))
    d = schedule(Inputs(pending, [slow, other], gpus(2), now=before, policy="guarded",
                        arrivals=arrivals))  # fmt: skip
    assert d.order[0] == short[0].id  # 199 s < 2 x 100 s: not yet
    assert arrivals.longest == 100.0
    # the slow job ended; a 1-GPU job holds its GPU: the record of 100 s stays
    late = make_job(1, time_limit=10 * H, t=before)
    transition(late, State.RUNNING, now=before, gpus=(0,))
    d = schedule(Inputs(pending, [late, other], gpus(2), now=before + 2, policy="guarded",
                        arrivals=arrivals))  # fmt: skip
    assert d.order[0] == wide.id  # 201 s >= 2 x 100 s, and 1.45x >= 1.3x the work left
    assert set(d.expected) == {wide.id}


def test_the_jobs_not_overdue_go_smallest_gpu_area_first(make_job: MakeJob) -> None:
    """A 4-GPU 1-h job asks 4 GPU-h, a 1-GPU 2-h job 2 GPU-h: the smaller area goes first
    (as ``sjf`` the shorter limit would)."""
    wide = make_job(4, time_limit=H, t=0.0)
    long1 = make_job(1, time_limit=2 * H, t=1.0)
    cpu = make_job(0, time_limit=3 * H, t=2.0)
    d = schedule(Inputs([wide, long1, cpu], [], gpus(4), now=10.0, policy="guarded"))
    assert d.order == [cpu.id, long1.id, wide.id]
    assert [s.job_id for s in d.starts] == [cpu.id, long1.id]  # the wide job waits for 4


def test_a_job_whose_dependency_is_met_may_be_the_overdue_one(make_job: MakeJob) -> None:
    """"A held job, or one waiting for a dependency or its begin time, is never the overdue
    one" (docs/scheduling.md): once its dependency is met (or its begin time past) the job
    waits for GPUs alone, and the bound holds for it too. A pipeline's step (`afterok:` a job
    that COMPLETED) was never the overdue one: short jobs passed it for ever."""
    from berth.dependency import Dependency

    wide, short, running = _scene(make_job)
    pending = [wide, *short]
    arrivals = _arrivals([*running, *pending], 40 * H)  # overdue, as in the first test
    wide.dependencies = (Dependency("afterok", 500),)
    waiting = schedule(Inputs(pending, running, gpus(2), now=11.0, policy="guarded",
                              arrivals=arrivals, done={500: State.RUNNING}))  # fmt: skip
    assert waiting.order[0] == short[0].id and wide.id not in waiting.expected
    assert waiting.pending[wide.id].reason is Reason.DEPENDENCY
    met = schedule(Inputs(pending, running, gpus(2), now=11.0, policy="guarded",
                          arrivals=arrivals, done={500: State.COMPLETED}))  # fmt: skip
    assert met.order[0] == wide.id
    assert met.expected == {wide.id: 2 * H}  # it holds the reservation: short jobs stop passing
    wide.dependencies = ()
    wide.not_before = 5.0  # its --begin is past
    begun = schedule(Inputs(pending, running, gpus(2), now=11.0, policy="guarded",
                            arrivals=arrivals))  # fmt: skip
    assert begun.order[0] == wide.id
    wide.not_before = 100.0  # still to come: never the overdue one
    later = schedule(Inputs(pending, running, gpus(2), now=11.0, policy="guarded",
                            arrivals=arrivals))  # fmt: skip
    assert later.order[0] == short[0].id and later.pending[wide.id].reason is Reason.BEGIN_TIME
