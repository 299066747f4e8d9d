"""The engine's passes driven through its ports (berth/daemon/ports.py) with a fake clock and
a fake process port: nothing is forked, time is exact (tests/daemon/enginekit.py)."""

from __future__ import annotations

import select
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from enginekit import EngineRig

from berth.core.states import State
from berth.daemon.engine.control import DIED_UNSTARTED, UNSTARTED_AGAIN


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[EngineRig]:
    r = EngineRig(tmp_path, gpus=1)
    try:
        yield r
    finally:
        r.close()


def test_a_job_times_out_exactly_at_its_limit(rig: EngineRig) -> None:
    a = rig.submit("sleep", "100", time_limit=60)
    rig.turn()
    assert rig.procs.started == [(a, 1)]
    attempt = rig.procs.attempts[f"/fake/run/{a}.1"]
    assert attempt.spec["time_limit"] == 60  # what its supervisor enforces
    rig.advance_to(rig.t0 + 59.999)
    assert rig.state(a) == "RUNNING"
    rig.advance_to(rig.t0 + 60)
    assert rig.state(a) == "TIMEOUT"
    job = rig.job(a)
    assert job.attempts[-1].start == rig.t0
    assert job.attempts[-1].end == rig.t0 + 60
    assert job.attempts[-1].reason == "time limit"


def test_the_daemons_max_job_time_is_the_limit_when_it_is_shorter(tmp_path: Path) -> None:
    rig = EngineRig(tmp_path, gpus=1, max_job_time=30.0)
    try:
        a = rig.submit("sleep", "100", time_limit=20)
        b = rig.submit("sleep", "100")
        rig.turn()
        rig.advance_to(rig.t0 + 20)
        assert rig.state(a) == "TIMEOUT"  # its own limit, the shorter
        assert rig.procs.started == [(a, 1), (b, 1)]
        rig.advance_to(rig.t0 + 49.999)
        assert rig.state(b) == "RUNNING"
        rig.advance_to(rig.t0 + 50)  # the daemon's 30 s
        assert rig.state(b) == "TIMEOUT"
    finally:
        rig.close()


def test_a_requeued_job_runs_again_behind_the_job_that_waited(rig: EngineRig) -> None:
    a = rig.submit("sleep", "100", time_limit=10, requeue=True)
    b = rig.submit("sleep", "5")
    rig.turn()
    rig.advance_to(rig.t0 + 10)  # a's limit: requeued at the end of the queue; b starts
    assert rig.state(a) == "PENDING"
    assert rig.job(a).attempts[-1].outcome.value == "PREEMPTED"
    assert rig.procs.started == [(a, 1), (b, 1)]
    rig.advance_to(rig.t0 + 15)  # b ends: a's second attempt starts at once
    assert rig.state(b) == "COMPLETED"
    assert rig.procs.started == [(a, 1), (b, 1), (a, 2)]
    assert rig.procs.attempts[f"/fake/run/{a}.2"].start == rig.t0 + 15
    assert rig.state(a) == "RUNNING"


def test_starts_follow_priority_then_submission(rig: EngineRig) -> None:
    x = rig.submit("sleep", "10")
    rig.turn()
    j1 = rig.submit("sleep", "1")
    j2 = rig.submit("sleep", "1", priority=5)
    j3 = rig.submit("sleep", "1")
    rig.turn()
    assert rig.procs.started == [(x, 1)]  # one GPU
    rig.advance_to(rig.t0 + 13)
    assert rig.procs.started == [(x, 1), (j2, 1), (j1, 1), (j3, 1)]
    starts = [rig.procs.attempts[f"/fake/run/{j}.1"].start for j in (j2, j1, j3)]
    assert starts == [rig.t0 + 10, rig.t0 + 11, rig.t0 + 12]  # no gap in fake time
    assert all(rig.state(j) == "COMPLETED" for j in (x, j1, j2, j3))


def test_a_job_whose_supervisor_dies_is_lost_and_the_next_starts(rig: EngineRig) -> None:
    a = rig.submit("sleep", "100")
    b = rig.submit("sleep", "1")
    rig.turn()
    rig.clock.t = rig.t0 + 7
    rig.procs.kill(a)  # it had passed its gate: it may have run
    rig.turn()
    assert rig.state(a) == "LOST"
    job = rig.job(a)
    assert job.attempts[-1].end == rig.t0 + 7
    assert "its supervisor died" in job.attempts[-1].reason
    assert rig.procs.started == [(a, 1), (b, 1)]
    assert rig.procs.attempts[f"/fake/run/{b}.1"].start == rig.t0 + 7


def test_a_supervisor_that_dies_at_its_gate_never_ran_the_job(rig: EngineRig) -> None:
    """Nothing ran: the job is queued again (it failed, FAILED 127, though it never ran:
    tests/daemon/test_chaos.py), a fresh supervisor runs it; a supervisor that dies there
    every time fails it after UNSTARTED_AGAIN tries."""
    a = rig.submit("sleep", "100")  # handed over (the pass ran with the submit)...
    assert rig.procs.handed == [(a, 1)]
    rig.procs.kill(a)  # ...and its supervisor dies before passing its gate
    rig.turn()
    assert rig.state(a) == "RUNNING"  # not LOST, not FAILED: nothing ran; it starts again
    first = rig.job(a).attempts[0]
    assert (first.outcome, first.reason) == (State.PREEMPTED, DIED_UNSTARTED)
    assert rig.procs.handed == [(a, 1), (a, 2)]
    assert rig.procs.started == [(a, 2)]
    assert rig.procs.discarded == [f"/fake/run/{a}.1"]
    for n in range(2, UNSTARTED_AGAIN + 2):
        attempt = rig.procs.attempts[f"/fake/run/{a}.{n}"]
        for line in ("go", "job"):  # (its run file as if it died at its gate again)
            attempt.record.pop(line, None)
        rig.procs.kill(a)
        rig.turn()
    assert rig.state(a) == "FAILED"
    assert len(rig.job(a).attempts) == UNSTARTED_AGAIN + 1


def test_a_start_whose_commit_fails_never_passes_its_gate(rig: EngineRig) -> None:
    x = rig.submit("sleep", "5")
    a = rig.submit("sleep", "1")
    rig.turn()
    writer = rig.use_writer()
    writer.db.execute("PRAGMA query_only=ON")  # the next commits fail
    rig.clock.t = rig.t0 + 5
    rig.procs._end(rig.procs.running()[0], rc=0)  # x ends
    rig.engine.schedule_pass()  # a is handed over at once; its commit fails
    assert rig.procs.handed == [(x, 1), (a, 1)]
    rig.until(lambda: rig.state(a) == "PENDING", "a's start withdrawn: a waits")
    attempt = rig.procs.attempts[f"/fake/run/{a}.1"]
    rig.until(lambda: attempt.state == "ended", "a's gate closed unopened")
    assert rig.procs.started == [(x, 1)]
    assert not rig.engine.jobs[a].attempts  # (no attempt counted: issue 41.7)
    assert (rig.engine.reason(a) or "").startswith("StateUnwritable: ")
    writer.db.execute("PRAGMA query_only=OFF")
    rig.loop.run_until_complete(rig.engine.drain())  # (the journal's retry)
    assert rig.job(x).state.value == "COMPLETED"
    rig.until(lambda: (a, 1) in rig.procs.started, "a starts once its start can be recorded")
    assert len(rig.engine.jobs[a].attempts) == 1


def test_a_start_whose_commit_on_the_loop_fails_is_never_handed_over(rig: EngineRig) -> None:
    x = rig.submit("sleep", "5")
    a = rig.submit("sleep", "1")
    rig.turn()
    rig.store.db.execute("PRAGMA query_only=ON")  # (no writer thread: commits on the loop)
    rig.advance_to(rig.t0 + 5)
    assert rig.procs.handed == [(x, 1)]  # withdrawn before its hand-over
    assert rig.state(a) == "PENDING"  # (it waits: issue 41.7)
    rig.store.db.execute("PRAGMA query_only=OFF")
    rig.engine.flush(force=True)  # commits again: a is tried again at once
    rig.turn()
    assert rig.procs.started == [(x, 1), (a, 1)]


def test_a_hand_over_that_fails_fails_the_job_and_frees_its_gpu(rig: EngineRig) -> None:
    rig.procs.refuse = "no supervisor for you"
    a = rig.submit("sleep", "1")
    rig.turn()
    assert rig.state(a) == "FAILED"
    assert rig.job(a).attempts[-1].reason == "no supervisor for you"
    rig.procs.refuse = None
    b = rig.submit("sleep", "1")
    rig.turn()
    assert rig.procs.started == [(b, 1)]  # its claim was released


def test_an_end_heard_before_its_commit_is_acted_on_frees_the_gpu(rig: EngineRig) -> None:
    """The committer opens a gate before the loop hears the commit is done: a short job can
    end (and its supervisor say so) before. Its claims must go all the same."""
    rig.submit("sleep", "5")
    rig.turn()
    a = rig.submit("sleep", "0")
    b = rig.submit("sleep", "1")
    rig.use_writer()  # commits on their own thread
    rig.clock.t = rig.t0 + 5
    rig.procs._end(rig.procs.running()[0], rc=0)  # x ends
    rig.engine.schedule_pass()  # a is started: its commit leaves for the writer
    gate = rig.procs.attempts[f"/fake/run/{a}.1"].gate
    assert select.select([gate], [], [], 30)[0], "the committer opens a's gate"
    rig.procs.poll_gates()
    rig.procs._end(rig.procs.running()[0], rc=0)  # a ends before the loop hears more
    rig.until(lambda: (b, 1) in rig.procs.started, "b starts on the GPU a had")
    assert rig.state(a) == "COMPLETED"
    assert list(rig.engine.committing) in ([], [b])


def test_a_failed_hand_over_leaves_its_gate_to_the_commit(rig: EngineRig) -> None:
    """The write end of a start's gate belongs to the commit that carries it until that
    commit is done (the committer writes into it): a hand-over that fails meanwhile must not
    close it, or the committer would write into whatever took its number."""
    rig.submit("sleep", "5")
    rig.turn()
    a = rig.submit("sleep", "1")
    rig.use_writer()
    lock = sqlite3.connect(str(rig.tmp / "berth.db"), isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")  # the writer's next commit waits for us
    files = []
    try:
        rig.clock.t = rig.t0 + 5
        rig.procs._end(rig.procs.running()[0], rc=0)  # x ends...
        rig.engine.flush(force=True)  # ...and its end is being committed (in flight)
        rig.procs.refuse = "no supervisor"
        rig.engine.schedule_pass()  # a's start waits for the next commit; its hand-over fails
        assert rig.state(a) == "FAILED"
        # files that take the free descriptor numbers (a closed gate's among them)
        files = [open(rig.tmp / f"f{i}", "w+b", buffering=0) for i in range(16)]
    finally:
        lock.rollback()
        lock.close()
    rig.loop.run_until_complete(rig.engine.drain())
    for f in files:
        f.seek(0)
        assert f.read() == b""
        f.close()
    assert rig.job(a).attempts[-1].reason == "no supervisor"


def test_submit_and_release_times_come_from_the_engines_clock(rig: EngineRig) -> None:
    from berth.daemon.engine.front import Front
    from berth.daemon.requests.jobs import release_jobs

    rig.clock.t = rig.t0 + 5.0
    a = rig.submit("true", hold=True)
    assert rig.engine.jobs[a].submit_time == rig.t0 + 5.0
    rig.clock.t = rig.t0 + 9.0
    rig.loop.run_until_complete(release_jobs(Front(rig.engine), rig.peer, {"job_ids": [a]}))
    assert rig.engine.jobs[a].history[-1].at == rig.t0 + 9.0


def test_a_start_its_supervisor_cannot_record_waits_for_space(rig: EngineRig) -> None:
    """Issue 41.7: the commit went through, but the supervisor could not write the run
    file's ``go`` (a full disk): nothing ran; the job waits, counted no attempt, and is tried
    again after a pause (not by every pass)."""
    a = rig.submit("sleep", "1")
    rig.turn()
    first = rig.procs.attempts[f"/fake/run/{a}.1"]
    why = "cannot write its run file '/state/run/1.1': No space left on device"
    rig.procs._end(first, rc=127, error=why, unstarted=True, nospace=why)
    assert rig.state(a) == "PENDING"
    assert not rig.engine.jobs[a].attempts
    assert rig.engine.reason(a) == f"StateDiskFull: {why}; it starts when space returns"
    assert rig.engine.diskfull.disk_full
    rig.turn()  # passes start nothing while the disk is full
    assert rig.procs.handed == [(a, 1)]
    rig.until(lambda: len(rig.procs.handed) == 2, "tried again after a pause")
    rig.until(lambda: rig.procs.started == [(a, 1), (a, 1)], "it runs")
    rig.until(lambda: not rig.engine.diskfull.full, "the disk has room again (go was written)")


def test_a_run_file_that_cannot_be_made_for_want_of_space_waits(rig: EngineRig) -> None:
    rig.procs.refuse = "[Errno 28] No space left on device: '/state/run/1.1'"
    a = rig.submit("sleep", "1")
    rig.turn()
    assert rig.state(a) == "PENDING" and not rig.engine.jobs[a].attempts  # (not FAILED)
    assert (rig.engine.reason(a) or "").startswith("StateDiskFull: cannot make its run file")
    assert rig.engine.diskfull.disk_full  # (its commit went through: still full)
    rig.procs.refuse = None
    rig.until(lambda: rig.procs.started == [(a, 1)], "it runs after a pause")


def test_a_full_disk_of_one_jobs_own_log_holds_back_only_that_job(rig: EngineRig) -> None:
    """Its -o on a disk over quota (not the state's): it waits a minute, the others start."""
    a = rig.submit("sleep", "1")
    rig.turn()
    why = "cannot open log file '/home/alice/out.log': Disk quota exceeded"
    first = rig.procs.attempts[f"/fake/run/{a}.1"]
    rig.procs._end(first, rc=127, error=why, unstarted=True, nospace=why,
                   nospace_path="/home/alice/out.log")  # fmt: skip
    job = rig.engine.jobs[a]
    assert job.state.value == "PENDING" and not job.attempts
    assert job.not_before == rig.clock.time() + 60
    assert not rig.engine.diskfull.full
    b = rig.submit("sleep", "1")
    rig.turn()
    assert rig.procs.started == [(a, 1), (b, 1)]  # (nobody else waits for it)


def test_a_try_that_finds_nothing_to_start_leaves_the_next_one_due(rig: EngineRig) -> None:
    """The disk found full, the try after the pause finds the GPU taken (nothing to start):
    later tries still come (the queue is never left blocked for good)."""
    a = rig.submit("sleep", "1")
    rig.turn()
    why = "cannot write its run file '/state/run/1.1': No space left on device"
    rig.procs._end(rig.procs.attempts[f"/fake/run/{a}.1"], rc=127, nospace=why, unstarted=True)
    x = rig.engine.diskfull
    assert x.full
    x.room()  # (as a commit after failures would): a try is due, and a job takes the GPU
    b = rig.submit("sleep", "100", priority=9)
    rig.turn()
    assert rig.procs.handed == [(a, 1), (b, 1)]
    rig.until(lambda: not x.full, "b's start went through")
    rig.advance_to(rig.t0 + 100)  # b ends: a starts
    rig.until(lambda: (a, 1) in rig.procs.started[1:], "a starts")


def test_a_lost_jobs_gpus_go_to_no_other_job_before_it_is_recorded_lost(rig: EngineRig) -> None:
    """A supervisor killed while its job runs: the job's leftovers are ended (SIGTERM, then
    SIGKILL after the grace) and only then is it LOST (engine/leftovers.py). Until then its
    GPUs are its own in every pass, even once nothing holds its claim (chaos seed 239: the next
    job started on the GPU 13 ms before the LOST was recorded)."""
    a = rig.submit("sleep", "100")
    b = rig.submit("sleep", "1")
    rig.turn()
    assert rig.procs.started == [(a, 1)]
    later: list[Any] = []

    def end_leftovers(
        path: str, uid: int, lease_id: str | None, grace: float, then: Any = None
    ) -> list[int]:
        later.append(then)
        return [4_242_424]  # (one process left, ending: `then` once it has)

    rig.procs.end_leftovers = end_leftovers  # type: ignore[method-assign]
    rig.procs.kill(a)  # (its claim's descriptors close with it here)
    rig.turn()
    assert rig.state(a) == "RUNNING" and rig.procs.started == [(a, 1)]  # b waits
    later[0]()  # what it left has ended: LOST now, and the GPU b's
    rig.turn()
    assert rig.state(a) == "LOST"
    assert rig.procs.started == [(a, 1), (b, 1)]
