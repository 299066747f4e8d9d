"""Acceptance: a start gate opens once its start is written to the state database's log,
before that log is forced to disk (berth/daemon/store/writer.py; issue 35's dispatch gap). A
daemon killed at that very moment has lost nothing: each job that ran is RUNNING in the
database it finds on restart, and no job runs twice."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from helpers import wait_until


def test_kill9_the_moment_a_burst_s_jobs_start_finds_each_started_one_recorded(
    daemon: Any,
) -> None:
    daemon.start()
    ran, once = (os.path.join(str(daemon.fake.root), name) for name in ("ran", "stopped"))
    # The first job to run stops the daemon at its first instant (wherever its committer is:
    # between the gates and the log's sync, or before the loop has heard of the commit); each
    # says it ran. The four start in one pass, behind one commit. (Once: the daemon's pid is
    # never signalled after its death.)
    script = (
        f'mkdir {once} 2>/dev/null && kill -STOP {daemon.proc.pid}; echo "$BERTH_JOB_ID" >> {ran}'
    )
    ids = [daemon.submit("sh", "-c", script, hold=True) for _ in range(4)]
    daemon.call("release_job", job_ids=ids)
    wait_until(lambda: os.path.exists(ran), timeout=10, message="a job of the burst runs")
    daemon.kill9()
    with open(ran) as f:
        first = [int(line) for line in f.read().split()]
    # What a restarted daemon will read: every job that ran is recorded as started.
    db = sqlite3.connect(os.path.join(daemon.state_dir, "berth.db"), isolation_level=None)
    try:
        rows = dict(db.execute("SELECT id, launched FROM jobs WHERE state = 'RUNNING'"))
    finally:
        db.close()
    assert first and all(rows.get(job_id, 0) >= 1 for job_id in first), (first, rows)
    daemon.start()
    done = daemon.wait_done(ids, timeout=60)
    assert {r["state"] for r in done.values()} == {"COMPLETED"}, done
    with open(ran) as f:
        runs = sorted(int(line) for line in f.read().split())
    assert runs == sorted(ids)  # each exactly once: the ones gated at the kill ran later
