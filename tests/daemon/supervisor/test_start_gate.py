"""The start gate (berth/daemon/supervisor/gate.py): an attempt goes to its supervisor while its start is
being committed, and its command runs only once that start is durable.

The fault point is real and needs no hook: another process holds the state database's write
lock (as `sqlite3 berth.db` with an open transaction would), so the commit of a start waits
(and after SQLite's busy timeout, fails) while the attempt sits at its gate.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from helpers import wait_until

from berth.daemon.supervisor import runfile


def _blocker_and_job(daemon: Any) -> tuple[int, int, str, str]:
    """One GPU: a job holding it until ``gate`` exists, and job J waiting behind it, which
    appends a line to ``marker`` when it runs."""
    daemon.start(gpus=1)
    gate = str(daemon.fake.root / "gate")
    marker = str(daemon.fake.root / "ran")
    blocker = daemon.submit("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.01; done")
    wait_until(lambda: daemon.job(blocker)["state"] == "RUNNING", message="blocker runs")
    job = daemon.submit("sh", "-c", f"echo ran >> {marker}")
    assert daemon.job(job)["state"] == "PENDING"
    return blocker, job, gate, marker


def _lock_database(daemon: Any) -> sqlite3.Connection:
    db = sqlite3.connect(os.path.join(daemon.state_dir, "berth.db"), isolation_level=None)
    db.execute("BEGIN IMMEDIATE")  # the daemon's commits now wait for us
    return db


def _at_gate(path: str) -> bool:
    info = runfile.read_run_file(path)
    return "sup" in info and runfile.supervisor_alive(path)


def test_daemon_killed_while_a_start_is_not_durable_never_runs_it_and_runs_it_once_later(
    daemon: Any,
) -> None:
    blocker, job, gate, marker = _blocker_and_job(daemon)
    db = _lock_database(daemon)
    try:
        open(gate, "w").close()  # the blocker ends: J is started, its commit waits
        path = os.path.join(daemon.state_dir, "run", f"{job}.1")
        wait_until(lambda: _at_gate(path), message="J handed to a supervisor, at its gate")
        assert "go" not in runfile.read_run_file(path)
        assert not os.path.exists(marker)
        daemon.kill9()  # before the start is durable: the gate closes unopened
        wait_until(lambda: not runfile.supervisor_alive(path), message="J's supervisor ends")
        info = runfile.read_run_file(path)
        assert "go" not in info and "job" not in info and "exit" not in info
        assert not os.path.exists(marker)  # never ran
    finally:
        db.rollback()
        db.close()
    daemon.start(gpus=1)
    rows = daemon.wait_done([blocker, job])
    assert rows[blocker]["state"] == "COMPLETED"  # (its end was recorded while down)
    assert rows[job]["state"] == "COMPLETED"
    with open(marker) as f:
        assert f.read() == "ran\n"  # exactly once
    assert len(daemon.job(job)["attempts"]) == 1  # the unrecorded start left no attempt


def test_a_start_whose_commit_fails_is_withdrawn_never_runs_and_waits(daemon: Any) -> None:
    blocker, job, gate, marker = _blocker_and_job(daemon)
    db = _lock_database(daemon)
    try:
        open(gate, "w").close()
        path = os.path.join(daemon.state_dir, "run", f"{job}.1")
        wait_until(lambda: _at_gate(path), message="J at its gate")
        # SQLite gives up after its busy timeout (5 s): the commit fails, the start is
        # withdrawn (its gate closes unopened) and the job waits, PENDING again with no
        # attempt (issue 41.7: a resource running out fails no job), as shown at once.
        # (Locked, not full: its reason is StateUnwritable.)
        wait_until(
            lambda: "StateUnwritable" in str(daemon.call("queue", all=True)["jobs"]),
            timeout=20, message="J withdrawn, waiting",
        )  # fmt: skip
        wait_until(lambda: not runfile.supervisor_alive(path), message="its supervisor free")
        assert daemon.job(job)["state"] == "PENDING"
        assert not daemon.job(job)["attempts"]
        assert not os.path.exists(marker)
    finally:
        db.rollback()
        db.close()
    rows = daemon.wait_done([blocker, job], timeout=60)  # commits again: J starts
    assert rows[blocker]["state"] == "COMPLETED"
    assert rows[job]["state"] == "COMPLETED"
    assert len(daemon.job(job)["attempts"]) == 1  # the withdrawn start left no attempt
    with open(marker) as f:
        assert f.read() == "ran\n"  # exactly once
    daemon.stop()  # everything the retries committed is what a restart finds
    daemon.start(gpus=1)
    assert daemon.job(job)["state"] == "COMPLETED"
    assert daemon.job(blocker)["state"] == "COMPLETED"
