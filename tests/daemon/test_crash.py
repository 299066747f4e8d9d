"""Acceptance: kill -9 of the daemon loses nothing and runs nothing twice (issue 4)."""

from __future__ import annotations

import os

import records
from helpers import wait_until

from berth.daemon import runfile


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
    running = wait_until(
        lambda: [r["id"] for r in daemon.call("queue", states=["R"])["jobs"]] or None,
        message="jobs run",
    )
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
    wait_until(lambda: len(daemon.call("queue", states=["R"])["jobs"]) == 2, message="running")
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
    daemon.call("release", job_ids=[held])
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
    wait_until(lambda: len(os.listdir(run_dir)) == 4, message="4 spares")
    assert all(n.startswith("spare.") for n in os.listdir(run_dir))
    spares = {os.stat(os.path.join(run_dir, n)).st_ino for n in os.listdir(run_dir)}
    second = daemon.submit(*daemon.workload("--seconds", "60"))
    path = os.path.join(run_dir, f"{second}.1")
    wait_until(lambda: "job" in runfile.read_run_file(path), message="job started")
    assert os.stat(path).st_ino in spares  # a spare took the new name
    assert runfile.read_run_file(path).keys() == {"sup", "job"}  # nothing of its past
    daemon.call("cancel", job_ids=[second])
    assert daemon.wait_done([second])[second]["state"] == "CANCELLED"
