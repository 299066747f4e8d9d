"""`berth show` of a job `berth queue` already lists, before its row is written: the queue
reads the engine's memory, so `show` must not read only the store (it said "its stored spec
does not read as a job" in that gap)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from enginekit import EngineRig

from berth.daemon.engine.admission import admit
from berth.daemon.engine.front import Front


def test_show_answers_for_a_job_queued_but_not_yet_written(tmp_path: Path) -> None:
    rig = EngineRig(tmp_path, gpus=1)
    rig.use_writer()  # commits on their own thread, as in the daemon
    lock = sqlite3.connect(tmp_path / "berth.db", isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")  # another writer holds the database: no commit lands
    spec = {"argv": ["echo", "hi"], "env": {"PATH": "/bin"}, "cwd": str(tmp_path), "hold": True}
    task = asyncio.ensure_future(admit.submit(rig.engine, rig.peer, spec), loop=rig.loop)
    try:
        rig.until(lambda: len(rig.engine.jobs) == 1, "the job is in the engine's table")
        (job_id,) = rig.engine.jobs
        assert not task.done() and rig.store.job(job_id) is None  # listed, not written
        job, out = Front(rig.engine).show(job_id)
        assert job.id == job_id and out["command"] == ["echo", "hi"]
    finally:
        lock.execute("ROLLBACK")
        lock.close()
        rig.until(task.done, "the submit is durable once the lock is gone")
        rig.close()
    assert int(task.result()["job_id"]) == job_id
