"""Admin reservations in the core (issue 24.1), on constructed scenarios: during a window only
the holders' jobs start on its GPUs; before it others' jobs may use them only if their time
limit ends by its start (backfill); a job without a time limit is kept off (unless the window
lets it); the reason is ``Reservation`` in plain words; a window's start and end wake the pass."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from berth.core import Inputs, Job, Reason, State, Window, schedule, transition

from .conftest import gpus

MakeJob = Callable[..., Job]
H = 3600.0


def _alice(start: float = 0.0, end: float = 2 * H, **kw: object) -> Window:
    return Window(3, (0, 1), start, end, frozenset({"alice"}), label="alice", **kw)  # type: ignore[arg-type]


def _started(d: object) -> dict[int, tuple[int, ...]]:
    return {s.job_id: s.gpus for s in d.starts}  # type: ignore[attr-defined]


def test_during_the_window_only_the_holders_jobs_start_on_its_gpus(make_job: MakeJob) -> None:
    bob = make_job(2, user="bob", time_limit=600.0)
    d = schedule(Inputs([bob], [], gpus(2), now=H, reservations=[_alice()]))
    assert d.starts == []
    p = d.pending[bob.id]
    assert p.reason is Reason.RESERVATION
    assert p.detail == "GPUs 0,1 are reserved for alice for another 1:00:00 (reservation 3)"
    alice = make_job(2, user="alice")
    d = schedule(Inputs([alice], [], gpus(2), now=H, reservations=[_alice()]))
    assert _started(d) == {alice.id: (0, 1)}


def test_others_use_the_gpus_outside_the_reservation(make_job: MakeJob) -> None:
    bob = make_job(2, user="bob")
    d = schedule(Inputs([bob], [], gpus(4), now=H, reservations=[_alice()]))
    assert _started(d) == {bob.id: (2, 3)}


def test_a_holder_takes_its_reserved_gpus_first(make_job: MakeJob) -> None:
    alice = make_job(1, user="alice", prefer=(3,))
    win = Window(1, (2,), 0.0, H, frozenset({"alice"}), label="alice")
    d = schedule(Inputs([alice], [], gpus(4), now=10.0, reservations=[win]))
    assert _started(d) == {alice.id: (2,)}


def test_backfill_before_the_window_if_the_time_limit_ends_by_its_start(
    make_job: MakeJob,
) -> None:
    win = _alice(start=2 * H, end=4 * H)
    short = make_job(2, user="bob", time_limit=H)  # ends at 1 h, before 2 h: may use them
    d = schedule(Inputs([short], [], gpus(2), now=0.0, reservations=[win]))
    assert _started(d) == {short.id: (0, 1)}
    long = make_job(2, user="bob", time_limit=3 * H)  # would run into the window
    d = schedule(Inputs([long], [], gpus(2), now=0.0, reservations=[win]))
    assert d.starts == [] and d.pending[long.id].reason is Reason.RESERVATION
    assert d.pending[long.id].detail == (
        "GPUs 0,1 are reserved for alice in 2:00:00 (reservation 3); its time limit 3:00:00 "
        "would run into it"
    )
    exact = make_job(2, user="bob", time_limit=2 * H)  # ends exactly as it opens
    assert _started(schedule(Inputs([exact], [], gpus(2), now=0.0, reservations=[win])))


def test_a_job_without_a_time_limit_is_kept_off_gpus_reserved_later(make_job: MakeJob) -> None:
    far = _alice(start=30 * 86400.0, end=31 * 86400.0)
    open_ended = make_job(1, user="bob")
    d = schedule(Inputs([open_ended], [], gpus(2), now=0.0, reservations=[far]))
    assert d.starts == [] and d.pending[open_ended.id].reason is Reason.RESERVATION
    assert "a job without a time limit (-t) may run into it" in d.pending[open_ended.id].detail
    allowed = _alice(start=30 * 86400.0, end=31 * 86400.0, unlimited=True)
    d = schedule(Inputs([open_ended], [], gpus(2), now=0.0, reservations=[allowed]))
    assert _started(d) == {open_ended.id: (0,)}  # the admin allows it


def test_after_the_window_the_gpus_are_everyones(make_job: MakeJob) -> None:
    bob = make_job(2, user="bob")
    d = schedule(Inputs([bob], [], gpus(2), now=2 * H, reservations=[_alice()]))
    assert _started(d) == {bob.id: (0, 1)}


def test_the_window_wakes_the_pass_at_its_start_and_end(make_job: MakeJob) -> None:
    bob = make_job(1, user="bob")
    win = _alice(start=H, end=2 * H)
    assert schedule(Inputs([bob], [], gpus(2), now=0.0, reservations=[win])).wakeup == H
    d = schedule(Inputs([bob], [], gpus(2), now=H + 1, reservations=[win]))
    assert d.wakeup == 2 * H
    d = schedule(Inputs([bob], [], gpus(2), now=2 * H, reservations=[win]))
    assert d.wakeup is None


def test_running_jobs_are_not_stopped_when_a_window_opens(make_job: MakeJob) -> None:
    bob = make_job(2, user="bob")
    transition(bob, State.RUNNING, now=0.0, gpus=(0, 1))
    alice = make_job(2, user="alice")
    d = schedule(Inputs([alice], [bob], gpus(2), now=H, reservations=[_alice()]))
    assert d.starts == []  # (and the core stops no job: it has no such decision)
    assert d.pending[alice.id].reason is Reason.RESOURCES  # it waits for bob's job to end


def test_a_project_reservation_matches_the_jobs_project(make_job: MakeJob) -> None:
    class ProjectJob(Job):
        """A job model with a project (the field another change adds to the job)."""

        __slots__ = ("project",)

    win = Window(5, (0,), 0.0, H, projects=frozenset({"vision"}), label="project vision")
    base = make_job(1, user="bob")
    mine = ProjectJob(id=base.id, submit_time=0.0, request=base.request, user="bob")
    mine.project = "vision"
    assert win.holds(mine) and not win.holds(base)
    d = schedule(Inputs([mine], [], gpus(1), now=10.0, reservations=[win]))
    assert _started(d) == {mine.id: (0,)}
    d = schedule(Inputs([base], [], gpus(1), now=10.0, reservations=[win]))
    assert d.pending[base.id].detail.startswith("GPU 0 is reserved for project vision")


def test_a_job_that_does_not_fit_anyway_waits_for_resources(make_job: MakeJob) -> None:
    big = make_job(4, user="bob")
    d = schedule(Inputs([big], [], gpus(2), now=H, reservations=[_alice()]))
    assert d.pending[big.id].reason is Reason.BAD_CONSTRAINTS  # (never fits: not the window)
    running = make_job(2, user="carol", time_limit=H)
    transition(running, State.RUNNING, now=0.0, gpus=(2, 3))
    wide = make_job(3, user="bob")
    d = schedule(Inputs([wide], [running], gpus(4), now=H / 2, reservations=[_alice()]))
    assert d.pending[wide.id].reason is Reason.RESOURCES


def test_the_simulator_style_pass_decides_the_same(make_job: MakeJob) -> None:
    """Without explanations (the simulator's passes) the same jobs start."""
    win = _alice(start=2 * H, end=4 * H)
    jobs = [make_job(1, user="bob", time_limit=3 * H), make_job(1, user="bob", time_limit=H),
            make_job(1, user="alice"), make_job(1, user="carol")]  # fmt: skip
    both = [schedule(Inputs(jobs, [], gpus(3), now=0.0, reservations=[win], explain=e))
            for e in (True, False)]  # fmt: skip
    assert _started(both[0]) == _started(both[1])
    assert set(_started(both[0])) == {jobs[0].id, jobs[1].id, jobs[2].id}


def _replay(jobs: list[Job], running: list[Job], n: int, windows: list[Window]) -> dict[int, float]:
    """Pass after pass, at each end and window change, as the daemon's timer would: every
    job runs exactly its time limit. The start time of each job."""
    started: dict[int, float] = {}
    pending, now = list(jobs), 0.0
    while pending:
        d = schedule(Inputs(pending, running, gpus(n), now=now, reservations=windows))
        for s in d.starts:
            job = next(j for j in pending if j.id == s.job_id)
            transition(job, State.RUNNING, now=now, gpus=s.gpus)
            started[job.id] = now
            pending.remove(job)
            running.append(job)
        ends = [j.attempt.start + j.time_limit for j in running if j.attempt and j.time_limit]
        for j in [j for j in running if j.attempt and j.attempt.start + (j.time_limit or 0) <= now]:
            transition(j, State.COMPLETED, now=now, exit_code=0)
            running.remove(j)
        later = [t for t in (*ends, d.wakeup or now) if t > now]
        if not later:
            break
        now = min(later)
    return started


@pytest.mark.parametrize("until", [100.0, 10 * H])
def test_a_job_kept_off_by_a_reservation_is_the_head_and_long_jobs_do_not_jump_it(
    make_job: MakeJob, until: float
) -> None:
    """Issue 32.2: 8 GPUs, GPUs 0-1 reserved until 100 s (or 10 h), four 1-h jobs ending at
    95.0-95.3 s; pending a 4-GPU 1-h job then six 1-GPU 24-h jobs. The 4-GPU job would fit
    now but for the reservation: it takes the EASY reservation (the GPUs that free at 95 s),
    so the 24-h jobs may not take them, and it starts at 95.1 s. Before the fix it had none
    while it would fit but for the window: the 24-h jobs took GPUs 2-3 as they freed, and it
    started when the window closed (100 s; after 10 h for the longer window)."""
    win = Window(1, (0, 1), 0.0, until, frozenset({"alice"}), label="alice")
    running = []
    for k in range(4):
        r = make_job(1, user="carol", time_limit=H)
        transition(r, State.RUNNING, now=95.0 + k / 10 - H, gpus=(2 + k,))
        running.append(r)
    wide = make_job(4, user="bob", time_limit=H, t=0.0)
    longs = [make_job(1, user="bob", time_limit=24 * H, t=0.0) for _ in range(6)]
    d = schedule(Inputs([wide, *longs], running, gpus(8), now=0.0, reservations=[win]))
    assert d.pending[wide.id].reason is Reason.RESERVATION  # (it would fit on 0, 1, 6, 7)
    assert d.expected[wide.id] == pytest.approx(95.1)  # (GPUs 6, 7 and the first two to end)
    started = _replay([wide, *longs], running, 8, [win])
    assert started[wide.id] < 96.0  # on GPUs 6, 7 (kept for it) and the first two that free
    assert all(started[j.id] > started[wide.id] for j in longs)


def test_a_reservation_head_waits_for_the_window_to_close_when_that_frees_gpus_first(
    make_job: MakeJob,
) -> None:
    """The head's reservation counts a window's end as GPUs freed: kept off GPUs 0-1 until
    100 s, with GPUs 2-3 busy for an hour, it expects GPUs 0-1 at 100 s (not after the hour)."""
    win = Window(1, (0, 1), 0.0, 100.0, frozenset({"alice"}), label="alice")
    busy = make_job(2, user="carol", time_limit=H)
    transition(busy, State.RUNNING, now=0.0, gpus=(2, 3))
    bob = make_job(2, user="bob", time_limit=H)
    d = schedule(Inputs([bob], [busy], gpus(4), now=10.0, reservations=[win]))
    assert d.pending[bob.id].reason is Reason.RESERVATION
    assert d.expected[bob.id] == 100.0


@pytest.mark.parametrize("policy", ["guarded", "fifo", "priority", "balanced"])
def test_a_job_kept_off_a_window_never_keeps_its_holders_off_it(
    make_job: MakeJob, policy: str
) -> None:
    """"A holder's job may use the reserved GPUs at any time" (docs/scheduling.md): bob's job,
    queued first and kept off alice's open window, is the head and reserves the window's GPUs
    for when it closes; alice's job (no time limit) must still start on them now. It waited
    behind bob's reservation (`Priority: behind job 1, which has GPUs reserved`) until the
    window closed: a non-holder's job kept the holders off their own GPUs."""
    bob = make_job(2, user="bob", gpu_ids=(0, 1), t=0.0)
    alice = make_job(2, user="alice", gpu_ids=(0, 1), t=1.0)
    for explain in (False, True):
        d = schedule(Inputs([bob, alice], [], gpus(4), now=H, policy=policy, explain=explain,
                            reservations=[_alice()]))  # fmt: skip
        assert _started(d) == {alice.id: (0, 1)}, (policy, explain, d.pending.get(alice.id))
        assert not explain or d.pending[bob.id].reason is Reason.RESERVATION
    # a holder's own head keeps its place: alice's 2-GPU job reserved for when her running
    # 1-h job ends is not passed by her later unlimited one-GPU job
    running = make_job(1, user="alice", time_limit=H)
    transition(running, State.RUNNING, now=0.0, gpus=(0,))
    wide = make_job(2, user="alice", gpu_ids=(0, 1), time_limit=H, t=2.0)
    later = make_job(1, user="alice", gpu_ids=(0, 1), t=3.0)
    d = schedule(Inputs([wide, later], [running], gpus(4), now=10.0, policy=policy,
                        reservations=[_alice()]))  # fmt: skip
    assert d.starts == [] and d.expected == ({} if policy == "fifo" else {wide.id: H})
