"""Acceptance: kill -9 of the daemon loses nothing and runs nothing twice (issue 4)."""

from __future__ import annotations

import os
import sqlite3

import records
from helpers import alive, wait_until

from berth.daemon.supervisor import runfile


def test_kill9_with_4_running_and_20_waiting_all_finish_once_with_true_codes(daemon):
    daemon.start()
    codes = {}
    ids = []
    for n in range(24):
        seconds = "1.0" if n < 4 else "0.1"
        code = n % 3  # 0, 1, 2: true exit codes to recover
        job_id = daemon.submit(
            *daemon.workload("--seconds", seconds, "--exit-code", str(code), "--record",
                             daemon.record)
        )  # fmt: skip
        ids.append(job_id)
        codes[job_id] = code
    wait_until(  # the first 4 have started (not merely been marked RUNNING)
        lambda: sum(e["event"] == "start" for e in records.read(daemon.record)) == 4,
        message="4 jobs start",
    )
    running = [r["id"] for r in daemon.call("queue", states=["R"])["jobs"]]
    assert sorted(running) == ids[:4]
    daemon.kill9()
    # The 4 running jobs end while no daemon is there: their supervisors record it.
    wait_until(
        lambda: sum(e["event"] == "end" for e in records.read(daemon.record)) == 4,
        timeout=10,
        message="first 4 jobs end while the daemon is down",
    )
    assert sum(e["event"] == "start" for e in records.read(daemon.record)) == 4
    daemon.start()
    rows = daemon.wait_done(ids, timeout=60)
    for job_id in ids:
        expected = "COMPLETED" if codes[job_id] == 0 else "FAILED"
        assert rows[job_id]["state"] == expected, rows[job_id]
        assert rows[job_id]["exit_code"] == codes[job_id]
    started = [int(e["job"]) for e in records.read(daemon.record) if e["event"] == "start"]
    assert sorted(started) == ids  # exactly once each
    for job_id in ids:
        assert len(daemon.job(job_id)["attempts"]) == 1


def test_kill9_while_jobs_run_then_restart_adopts_them(daemon):
    daemon.start()
    ids = [
        daemon.submit(*daemon.workload("--seconds", "1.5", "--record", daemon.record))
        for _ in range(2)
    ]
    wait_until(
        lambda: sum(e["event"] == "start" for e in records.read(daemon.record)) == 2,
        message="both started",
    )
    daemon.kill9()
    daemon.start()  # they are still running: adopted, not restarted
    assert {r["state"] for r in daemon.call("queue")["jobs"]} == {"RUNNING"}
    rows = daemon.wait_done(ids)
    assert {r["state"] for r in rows.values()} == {"COMPLETED"}
    assert len([e for e in records.read(daemon.record) if e["event"] == "start"]) == 2
    run_dir = os.path.join(daemon.state_dir, "run")
    wait_until(  # removed (or kept as spares for reuse) once the ends are durable
        lambda: all(n.startswith("spare.") for n in os.listdir(run_dir)), message="run files"
    )


def test_paused_after_crash_keeps_the_queue_until_resume_all(daemon):
    daemon.start("--paused-after-crash")
    blocker = [daemon.submit(*daemon.workload("--seconds", "30")) for _ in range(4)]
    wait_until(lambda: len(daemon.call("queue", states=["R"])["jobs"]) == 4, message="running")
    queued = daemon.submit(*daemon.workload("--seconds", "0.1"))
    daemon.kill9()
    daemon.start("--paused-after-crash")
    daemon.call("cancel", job_ids=blocker)
    daemon.wait_done(blocker)
    job = daemon.job(queued)
    assert job["state"] == "PENDING" and job["reason"] == "QueuePaused"
    assert daemon.berth("resume", "--all").returncode == 0
    assert daemon.wait_done([queued])[queued]["state"] == "COMPLETED"


def test_clean_stop_and_start_does_not_pause(daemon):
    daemon.start("--paused-after-crash")
    daemon.stop()
    daemon.start("--paused-after-crash")
    job_id = daemon.submit(*daemon.workload("--seconds", "0.05"))
    assert daemon.wait_done([job_id])[job_id]["state"] == "COMPLETED"


def test_hold_and_release_are_durable_once_answered(daemon):
    daemon.start()
    blocker = [daemon.submit(*daemon.workload("--seconds", "60")) for _ in range(4)]
    held = daemon.submit(*daemon.workload("--seconds", "0.05"))
    assert daemon.call("hold", job_ids=[held])["job_ids"] == [held]
    daemon.kill9()  # the moment after the answer
    daemon.start()
    assert daemon.job(held)["state"] == "PENDING"
    assert daemon.job(held)["reason"].startswith("Held")
    daemon.call("cancel", job_ids=blocker)
    daemon.call("release_job", job_ids=[held])
    assert daemon.wait_done([held])[held]["state"] == "COMPLETED"


def test_wait_answers_with_the_final_state(daemon):
    daemon.start()
    ids = [daemon.submit(*daemon.workload("--seconds", "0.01")) for _ in range(8)]
    with daemon.client() as c:
        for i in ids:
            reply = c.call("wait", job_id=i, timeout=30)
            assert reply["finished"] and reply["job"]["state"] == "COMPLETED"


def test_run_files_of_ended_attempts_are_reused_empty(daemon):
    daemon.start()
    first = [daemon.submit(*daemon.workload("--seconds", "0.01")) for _ in range(4)]
    daemon.wait_done(first)
    run_dir = os.path.join(daemon.state_dir, "run")
    wait_until(  # (a job's end is answered before its run file is renamed a spare)
        lambda: sorted(n.split(".")[0] for n in os.listdir(run_dir)) == ["spare"] * 4,
        message=f"4 spares, not {os.listdir(run_dir)}",
    )
    spares = {os.stat(os.path.join(run_dir, n)).st_ino for n in os.listdir(run_dir)}
    second = daemon.submit(*daemon.workload("--seconds", "60"))
    path = os.path.join(run_dir, f"{second}.1")
    wait_until(lambda: "job" in runfile.read_run_file(path), message="job started")
    assert os.stat(path).st_ino in spares  # a spare took the new name
    assert runfile.read_run_file(path).keys() == {"sup", "go", "job"}  # nothing of its past
    daemon.call("cancel", job_ids=[second])
    assert daemon.wait_done([second])[second]["state"] == "CANCELLED"


def _power_loss(daemon) -> None:
    """Every process of this 'boot' dies at once: the daemon, supervisors, jobs."""
    import signal

    daemon.kill9()
    run_dir = os.path.join(daemon.state_dir, "run")
    for name in os.listdir(run_dir):
        info = runfile.read_run_file(os.path.join(run_dir, name))
        for key, kill in (("sup", os.kill), ("job", os.killpg)):
            if info.get(key):
                try:
                    kill(info[key], signal.SIGKILL)
                except ProcessLookupError:
                    pass
    for name in os.listdir(run_dir):
        path = os.path.join(run_dir, name)
        wait_until(lambda p=path: not runfile.supervisor_alive(p), message="supervisors die")


def test_after_a_machine_restart_running_jobs_are_lost_or_requeued(daemon):
    import sqlite3

    daemon.start()
    plain = daemon.submit(*daemon.workload("--seconds", "60"))
    marker = daemon.fake.root / "runs"
    again = daemon.submit(
        "sh", "-c", f'echo x >> {marker}; [ "$(wc -l < {marker})" -ge 2 ] || sleep 60',
        requeue=True,
    )  # fmt: skip
    wait_until(lambda: len(daemon.call("queue", states=["R"])["jobs"]) == 2, message="running")
    wait_until(lambda: marker.exists(), message="second job started")
    _power_loss(daemon)
    # The machine comes back: another boot than the one the daemon recorded.
    db = sqlite3.connect(os.path.join(daemon.state_dir, "berth.db"))
    with db:
        db.execute("UPDATE meta SET value = 'an-earlier-boot' WHERE key = 'boot_id'")
    db.close()
    daemon.start()
    rows = daemon.wait_done([plain, again])
    assert rows[plain]["state"] == "LOST"
    assert "machine restarted" in daemon.job(plain)["attempts"][0]["reason"]
    assert rows[again]["state"] == "COMPLETED"  # requeued, ran again
    attempts = daemon.job(again)["attempts"]
    assert [a["outcome"] for a in attempts] == ["PREEMPTED", "COMPLETED"]
    assert marker.read_text() == "x\nx\n"


def test_a_daemon_crash_without_a_machine_restart_never_reruns_an_unrecorded_job(daemon):
    daemon.start()
    job = daemon.submit(*daemon.workload("--seconds", "60"), requeue=True)
    path = os.path.join(daemon.state_dir, "run", f"{job}.1")
    wait_until(lambda: "job" in runfile.read_run_file(path), message="the job started")
    _power_loss(daemon)  # (same boot: a supervisor killed by hand, say)
    daemon.start()
    row = daemon.wait_done([job])[job]
    assert row["state"] == "LOST"
    assert len(daemon.job(job)["attempts"]) == 1


def test_a_clean_stop_leaves_running_jobs_to_the_next_daemon(daemon):
    daemon.start()
    marker = daemon.fake.root / "ran"
    job = daemon.submit("sh", "-c", f"echo x >> {marker}; sleep 1; exit 3")
    wait_until(lambda: marker.exists(), message="job started")
    assert daemon.berth("daemon", "--stop").returncode == 0
    assert daemon.proc.wait(timeout=15) == 0
    daemon.start()
    row = daemon.wait_done([job])[job]
    assert (row["state"], row["exit_code"]) == ("FAILED", 3)
    assert marker.read_text() == "x\n"
    assert len(daemon.job(job)["attempts"]) == 1


def test_records_of_jobs_that_ended_long_ago_are_purged_and_ids_never_reused(daemon):
    import time

    daemon.start("--keep-finished", "3s")
    old = daemon.submit("true")
    ended = daemon.wait_done([old])[old]
    assert ended["state"] == "COMPLETED"
    end = daemon.job(old)["attempts"][0]["end"]
    wait_until(lambda: time.time() > end + 3.2, timeout=10, message="3 s pass")
    recent = daemon.submit("true")
    daemon.wait_done([recent])
    daemon.stop()
    daemon.start("--keep-finished", "3s")  # purges at start (and every hour)
    wait_until(lambda: daemon.berth("show", str(old)).returncode != 0, message="forgotten")
    assert daemon.job(recent)["state"] == "COMPLETED"  # kept
    end = daemon.job(recent)["attempts"][0]["end"]
    wait_until(lambda: time.time() > end + 3.2, timeout=10, message="3 s pass")
    daemon.stop()
    daemon.start("--keep-finished", "3s")  # every job is purged now, the newest too
    wait_until(lambda: daemon.call("queue", all=True)["jobs"] == [], message="all purged")
    assert daemon.submit("true") == recent + 1  # not 1 again



def test_kill9_between_a_burst_of_starts_and_its_commit_runs_none_and_loses_none(daemon):
    """The starts of one pass go to their supervisors while their one commit is written
    (issue 35.3). Kill the daemon after the hand-over, before that commit: no job has run
    (their start gates never opened), after the restart every job is PENDING as it was
    (neither lost nor running), and each then runs exactly once."""
    daemon.start()
    ids = [
        daemon.submit(*daemon.workload("--seconds", "0.2", "--record", daemon.record), hold=True)
        for _ in range(4)
    ]
    db = sqlite3.connect(os.path.join(daemon.state_dir, "berth.db"), isolation_level=None)
    db.execute("BEGIN IMMEDIATE")  # the daemon's next commit waits (busy_timeout 5 s)
    try:
        with daemon.client() as c:
            c.send("release_job", job_ids=ids)  # (its answer waits for that commit: not read)
            run_dir = os.path.join(daemon.state_dir, "run")

            def supervisors() -> list[int] | None:
                names = [n for n in os.listdir(run_dir) if not n.startswith("spare.")]
                pids = [runfile.read_run_file(os.path.join(run_dir, n)).get("sup") for n in names]
                return pids if len(pids) == 4 and all(pids) else None

            sups = wait_until(  # the four attempts handed over, each supervisor at its gate
                supervisors, timeout=4, message="the burst's attempts reach their supervisors"
            )
            daemon.kill9()
    finally:
        db.execute("ROLLBACK")
        db.close()
    wait_until(  # their gates closed unopened: the supervisors leave without running anything
        lambda: not [p for p in sups if p and alive(p)],
        timeout=10, message="the gated supervisors exit",
    )  # fmt: skip
    assert not [e for e in records.read(daemon.record) if e["event"] == "start"]
    daemon.start()
    rows = {r["id"]: r for r in daemon.call("queue", all=True)["jobs"]}
    assert [rows[i]["state"] for i in ids] == ["PENDING"] * 4  # (held: its release never durable)
    assert not [e for e in records.read(daemon.record) if e["event"] == "start"]
    daemon.call("release_job", job_ids=ids)
    rows = daemon.wait_done(ids)
    assert {r["state"] for r in rows.values()} == {"COMPLETED"}
    started = sorted(int(e["job"]) for e in records.read(daemon.record) if e["event"] == "start")
    assert started == ids  # once each: nothing ran from the withdrawn hand-over
    for job_id in ids:
        assert len(daemon.job(job_id)["attempts"]) == 1


def test_kill9_during_a_bulk_cancel_leaves_each_job_pending_or_cancelled(daemon):
    """Cancelling many pending jobs is one statement in one commit (issue 35): a daemon
    killed before that commit is durable leaves every job PENDING after its restart; once it
    is durable, every job CANCELLED, each with its end and its event. None is lost, none is
    half-written."""
    n = 2000
    daemon.start()
    first = daemon.submit("true", array=f"0-{n - 1}", hold=True)
    ids = list(range(first, first + n))
    db = sqlite3.connect(os.path.join(daemon.state_dir, "berth.db"), isolation_level=None)
    db.execute("BEGIN IMMEDIATE")  # the daemon's commit of the cancel waits (busy_timeout 5 s)
    try:
        done = daemon.call("cancel", all_mine=True)["cancelled"]
        assert len(done) == n and set(done.values()) == {"cancelled"}
        daemon.kill9()  # (answered from memory; its commit never happened)
    finally:
        db.execute("ROLLBACK")
        db.close()
    daemon.start()
    rows = {r["id"]: r for r in daemon.call("queue", all=True)["jobs"]}
    assert sorted(rows) == ids and {r["state"] for r in rows.values()} == {"PENDING"}
    assert len(daemon.call("cancel", all_mine=True)["cancelled"]) == n
    daemon.call("wait", job_id=first, timeout=30)  # (answered once the ends are durable)
    daemon.kill9()
    daemon.start()
    rows = {r["id"]: r for r in daemon.call("queue", all=True)["jobs"]}
    assert sorted(rows) == ids and {r["state"] for r in rows.values()} == {"CANCELLED"}
    for i in (ids[0], ids[-1]):
        job = daemon.job(i)
        assert job["history"][-1]["detail"] == "cancelled before it started", job
