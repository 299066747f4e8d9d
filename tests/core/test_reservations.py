"""Admin reservations in the core (issue 24.1), on constructed scenarios: during a window only
the holders' jobs start on its GPUs; before it others' jobs may use them only if their time
limit ends by its start (backfill); a job without a time limit is kept off (unless the window
lets it); the reason is ``Reservation`` in plain words; a window's start and end wake the pass."""

from __future__ import annotations

from collections.abc import Callable

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
