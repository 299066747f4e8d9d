"""A job's environment is stored once per user (issue 35.2, schema 10): 1,000 jobs from one
shell with a 50 KB environment cost the store about one copy of it, not 1,000; each job still
runs with it, `berth show` and a restart see it, and its row goes with the last job that
names it."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from berth.daemon.store.store import open_store

ENV_BYTES = 50_000
N = 1000


def _env(tag: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "BIG": tag * (ENV_BYTES // len(tag))}


def _stored(state_dir: str) -> tuple[int, int, int]:
    """(bytes of every job's spec, bytes of the environments table, its rows)."""
    db = sqlite3.connect(os.path.join(state_dir, "berth.db"))
    try:
        specs = db.execute("SELECT COALESCE(SUM(LENGTH(spec)), 0) FROM jobs").fetchone()[0]
        envs, rows = db.execute(
            "SELECT COALESCE(SUM(LENGTH(env)), 0), COUNT(*) FROM envs"
        ).fetchone()
    finally:
        db.close()
    return int(specs), int(envs), int(rows)


def test_a_thousand_jobs_with_one_environment_store_it_once(daemon: Any) -> None:
    daemon.start()
    env = _env("x")
    spec = {"argv": ["true"], "cwd": str(daemon.fake.root), "hold": True}
    # a jobs file's request (its environment sent once) and single submits (each its own copy)
    daemon.call("submit_all", jobs=[spec] * (N // 2), env=env)
    ids: list[int] = []
    with daemon.client() as c:  # (pipelined, 10 at a time: 50 KB each)
        for _ in range(N // 20):
            for _ in range(10):
                c.send("submit", job={**spec, "env": dict(env)})
            ids += [c.receive()["job_id"] for _ in range(10)]
    specs, envs, rows = _stored(daemon.state_dir)
    assert rows == 1 and ENV_BYTES <= envs < 2 * ENV_BYTES
    assert specs < N * 1000  # (each job's own fields; was N * 50 KB)
    shown = daemon.job(ids[-1])
    assert shown["state"] == "PENDING"
    store = open_store(daemon.state_dir)
    try:
        assert store.spec(ids[-1]).env == env and store.spec(1).env == env
    finally:
        store.close()
    # Another user's environment or another one of this user's: their own rows.
    daemon.submit("true", hold=True, env=_env("y"))
    assert _stored(daemon.state_dir)[2] == 2


def test_the_job_runs_with_it_across_a_restart_and_the_row_goes_with_its_jobs(
    daemon: Any,
) -> None:
    daemon.start()
    out = str(daemon.fake.root / "seen")
    env = {**_env("z"), "MARK": "here"}
    spec = {"argv": ["sh", "-c", f'echo "$MARK ${{#BIG}}" >> {out}'], "cwd": str(daemon.fake.root),
            "hold": True}  # fmt: skip
    ids = [r["job_id"] for r in daemon.call("submit_all", jobs=[spec] * 3, env=env)["replies"]]
    daemon.stop()
    daemon.start()  # (read back from the store: nothing of it in memory)
    daemon.call("release_job", job_ids=ids)
    daemon.wait_done(ids)
    with open(out) as f:
        assert f.read().splitlines() == [f"here {len(env['BIG'])}"] * 3
    assert _stored(daemon.state_dir)[2] == 1
    store = open_store(daemon.state_dir)
    try:
        with store.tx() as db:
            for i in ids:
                db.execute(store.PURGE_SQL, (i,))
    finally:
        store.close()
    assert _stored(daemon.state_dir)[2] == 0  # gone with the last job that named it


def test_launches_read_a_user_s_environment_back_once_each_their_own_copy(daemon: Any) -> None:
    """The specs of a queue of one user's jobs read back for their launches (jobs not among
    the journal's last committed: a long queue) select and decode their environment once,
    not once a job (issue 35.3: a real environment is a few KB of JSON); each spec gets a
    dict of its own."""
    daemon.start()
    env = _env("w")
    spec = {"argv": ["true"], "cwd": str(daemon.fake.root), "hold": True}
    ids = [r["job_id"] for r in daemon.call("submit_all", jobs=[spec] * 20, env=env)["replies"]]
    daemon.stop()
    store = open_store(daemon.state_dir)
    try:
        seen: list[str] = []
        store.db.set_trace_callback(seen.append)
        specs = [store.spec(i) for i in ids]
        store.db.set_trace_callback(None)
        assert [s.env for s in specs] == [env] * 20
        assert sum("FROM envs" in s for s in seen) == 1  # (was 20)
        assert sum("FROM jobs" in s for s in seen) == 20
        specs[0].env["MARK"] = "mine"  # (a copy each: one job's is not another's)
        assert "MARK" not in specs[1].env and "MARK" not in store.spec(ids[0]).env
    finally:
        store.close()
