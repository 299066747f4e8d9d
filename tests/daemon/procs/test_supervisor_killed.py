"""A job's processes never outlive the record of them: when its supervisor is killed (kill -9)
the job is recorded LOST only once its processes, even those that left its session, have been
ended, so its GPU is free again for the next job; and the same when the daemon finds such an
attempt on start."""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

from helpers import alive, wait_until

from berth.daemon.engine.control import DIED_UNSTARTED
from berth.daemon.supervisor.runfile import read_run_file


def _start_job(daemon: Any) -> tuple[int, int, int, int]:
    """A job whose child escapes its session; (job id, supervisor, leader, escaped child)."""
    child_file = os.path.join(daemon.fake.root, "child.pid")
    job = daemon.submit(
        "sh", "-c", f"setsid sleep 300 & echo $! > {child_file}; exec sleep 300", gpu_ids=[0]
    )
    run = os.path.join(daemon.state_dir, "run", f"{job}.1")
    info = wait_until(
        lambda: (i := read_run_file(run)).get("job") and os.path.exists(child_file) and i,
        message="job started",
    )
    child = int(wait_until(lambda: open(child_file).read().strip(), message="child pid"))
    wait_until(lambda: os.getsid(child) == child, message="the child left the job's session")
    return job, int(info["sup"]), int(info["job"]), child


def test_killed_supervisor_takes_its_job_along_and_frees_the_gpu(daemon: Any) -> None:
    daemon.start()
    job, sup, leader, child = _start_job(daemon)
    nxt = daemon.submit("true", gpu_ids=[0])
    assert daemon.job(nxt)["state"] == "PENDING"
    os.kill(sup, signal.SIGKILL)
    row = wait_until(
        lambda: (j := daemon.job(job))["state"] == "LOST" and j, message="job recorded LOST"
    )
    why = row["attempts"][-1]["reason"]
    assert "supervisor died" in why and "process(es) were ended" in why
    wait_until(lambda: not alive(leader) and not alive(child), message="job processes end")
    daemon.wait_done([nxt])
    assert daemon.job(nxt)["state"] == "COMPLETED"  # the GPU was free again


def test_supervisor_killed_while_the_daemon_is_down(daemon: Any) -> None:
    daemon.start()
    job, sup, leader, child = _start_job(daemon)
    daemon.kill9()
    os.kill(sup, signal.SIGKILL)
    wait_until(lambda: not alive(sup), message="supervisor gone")
    assert alive(leader) and alive(child)
    daemon.start()
    row = daemon.job(job)
    assert row["state"] == "LOST" and "process(es) were ended" in row["attempts"][-1]["reason"]
    wait_until(lambda: not alive(leader) and not alive(child), message="job processes end")


def test_an_adopted_supervisor_killed_takes_its_job_along_before_the_gpu_is_given_again(
    daemon: Any,
) -> None:
    """Found by tests/daemon/test_chaos.py (seed 13): a supervisor a restarted daemon adopted,
    killed, left its job running on its GPU, recorded LOST, and the GPU went to the next job
    while the first still ran."""
    daemon.start()
    job, sup, leader, child = _start_job(daemon)
    daemon.kill9()
    daemon.start()  # (adopts the supervisor: its run file is locked)
    assert daemon.job(job)["state"] == "RUNNING"
    nxt = daemon.submit("true", gpu_ids=[0])
    os.kill(sup, signal.SIGKILL)
    row = daemon.wait_done([job])[job]
    assert row["state"] == "LOST"
    assert "process(es) were ended" in daemon.job(job)["attempts"][-1]["reason"]
    wait_until(lambda: not alive(leader) and not alive(child), message="job processes end")
    assert daemon.wait_done([nxt])[nxt]["state"] == "COMPLETED"


def _at_its_gate(daemon: Any, marker: str) -> tuple[int, Any, Any]:
    """A held job released while the daemon's commits wait (another connection holds the
    database's write lock), its supervisor waiting at its start gate: (job, supervisor pid,
    the lock's connection, to roll back, and the client whose answers are not read)."""
    job = daemon.submit("sh", "-c", f"echo x >> {marker}", gpu_ids=[0], hold=True)
    db = sqlite3.connect(os.path.join(daemon.state_dir, "berth.db"), isolation_level=None)
    db.execute("BEGIN IMMEDIATE")  # the daemon's next commit waits (busy_timeout 5 s)
    client = daemon.client().__enter__()
    client.send("release_job", job_ids=[job])  # (answered once committed: not read)
    run = os.path.join(daemon.state_dir, "run", f"{job}.1")
    sup = wait_until(lambda: read_run_file(run).get("sup"), message="supervisor at its gate")
    return job, int(sup), (db, client)


def test_a_supervisor_killed_at_its_start_gate_leaves_the_job_to_run_once(daemon: Any) -> None:
    """Found by test_chaos.py (seed 10): a supervisor killed (or the fork server with its
    request) before its attempt passed the start gate failed the job (FAILED 127, 'its
    supervisor died') though its command never ran; it is queued again and runs once."""
    daemon.start()
    marker = daemon.fake.root / "ran"
    job, sup, (db, client) = _at_its_gate(daemon, str(marker))
    try:
        os.kill(sup, signal.SIGKILL)
        wait_until(lambda: not alive(sup), message="the supervisor is gone")
    finally:
        db.execute("ROLLBACK")
        db.close()
        client.close()
    row = daemon.wait_done([job])[job]
    assert row["state"] == "COMPLETED", daemon.job(job)
    attempts = daemon.job(job)["attempts"]
    assert [a["outcome"] for a in attempts] == ["PREEMPTED", "COMPLETED"]
    assert attempts[0]["reason"] == DIED_UNSTARTED
    assert marker.read_text() == "x\n"


def test_a_job_cancelled_at_its_start_gate_never_runs_when_its_supervisor_dies(
    daemon: Any,
) -> None:
    daemon.start()
    marker = daemon.fake.root / "ran"
    job, sup, (db, client) = _at_its_gate(daemon, str(marker))
    try:
        client.send("cancel", job_ids=[job])  # (its start is not durable: "terminating")
        wait_until(lambda: daemon.job(job)["state"] == "COMPLETING", message="cancel heard")
        os.kill(sup, signal.SIGKILL)
        wait_until(lambda: not alive(sup), message="the supervisor is gone")
    finally:
        db.execute("ROLLBACK")
        db.close()
        client.close()
    reply = daemon.call("wait", job_id=job, timeout=30)  # (answered once its end is durable)
    assert reply["finished"] and reply["job"]["state"] == "CANCELLED", daemon.job(job)
    daemon.kill9()
    daemon.start()  # (what it says is durable)
    assert daemon.job(job)["state"] == "CANCELLED"
    assert len(daemon.job(job)["attempts"]) == 1
    assert not marker.exists()


def test_a_job_that_ignores_sigterm_keeps_its_gpu_until_it_is_gone(daemon: Any) -> None:
    """A killed supervisor's job that takes its time to stop (it ignores SIGTERM: a training
    script saving a checkpoint) holds its GPU until it has ended, SIGKILL after
    `--kill-after` included: the next job on that GPU never starts beside it (it did, at once:
    the job was recorded LOST, its claims withdrawn, as soon as it was sent SIGTERM)."""
    daemon.start("--kill-after", "2")
    lock, shared = daemon.fake.root / "gpu0.lock", daemon.fake.root / "shared"
    locked = daemon.fake.root / "locked"
    stubborn = daemon.submit(
        "bash", "-c", f"trap '' TERM; exec 9>>{lock}; flock -n 9 && touch {locked} && sleep 300",
        gpu_ids=[0],
    )  # fmt: skip
    run = os.path.join(daemon.state_dir, "run", f"{stubborn}.1")
    info = wait_until(lambda: (i := read_run_file(run)).get("job") and i, message="it runs")
    wait_until(locked.exists, message="it holds its lock")
    nxt = daemon.submit(
        "bash", "-c", f"exec 9>>{lock}; flock -n 9 || echo x > {shared}", gpu_ids=[0]
    )
    os.kill(int(info["sup"]), signal.SIGKILL)
    wait_until(  # the daemon heard of it and sent its job SIGTERM (which it ignores)
        lambda: f"job {stubborn}: end" in Path(daemon.log).read_text(), message="its ending logged"
    )
    state = daemon.job(stubborn)["state"]
    if alive(int(info["job"])):  # (read after the state: it lived when the state was read)
        assert state == "RUNNING"  # (docs/daemon.md: it shows RUNNING until it has ended)
    assert daemon.wait_done([nxt])[nxt]["state"] == "COMPLETED"
    assert not shared.exists(), "the next job started while the first still held GPU 0"
    job = daemon.job(stubborn)
    assert job["state"] == "LOST" and "process(es) were ended" in job["attempts"][-1]["reason"]
    assert not alive(int(info["job"]))
