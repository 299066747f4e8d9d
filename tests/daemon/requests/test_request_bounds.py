"""What one request may cost the daemon (issue 20.9, DESIGN invariant 8): a job's
environment, an array's tasks, the jobs of one request and the jobs a user has queued are
bounded (``[limits]`` max_env_size, max_array_tasks, max_request_jobs, max_jobs; refused with
the value and the limit, nothing queued), and an array's tasks share one stored spec, so a
large environment is stored once, not once per task. Older databases still load."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from typing import Any

from berth import config
from berth.client import DaemonError
from berth.daemon.store import store as store_mod
from berth.daemon.store.store import Store


def _db_bytes(state_dir: str) -> int:
    base = os.path.join(state_dir, "berth.db")
    return sum(os.path.getsize(p) for p in (base, base + "-wal") if os.path.exists(p))


def _refused(daemon: Any, kind: str, **fields: Any) -> str:
    try:
        reply = daemon.call(kind, **fields)
    except DaemonError as e:
        return str(e)
    raise AssertionError(f"accepted: {reply}")


def _job(daemon: Any, **fields: Any) -> dict[str, Any]:
    return {"argv": ["true"], "env": {"PATH": "/usr/bin:/bin"}, "cwd": "/", "hold": True,
            **fields}  # fmt: skip


def test_the_defaults_bound_env_arrays_requests_and_queued_jobs():
    cfg = config.Config()
    assert cfg.limit_max_env_size == 256 * 1024 and cfg.limit_max_array_tasks == 10_000
    assert cfg.limit_max_request_jobs == 10_000 and cfg.limit_max_jobs == 50_000


def test_requests_past_the_limits_are_refused_with_the_value_and_the_limit(daemon):
    daemon.start()
    big = {"PATH": "/usr/bin:/bin", "BIG": "x" * (300 * 1024)}
    message = _refused(daemon, "submit", job=_job(daemon, env=big))
    assert "environment" in message and "300K" in message and "256K" in message
    assert "[limits] max_env_size" in message
    # a 700-byte request once queued 100,000 jobs: ten arrays of 10,000 tasks
    jobs = [_job(daemon, array="0-5999")] * 2
    message = _refused(daemon, "submit_all", jobs=jobs)
    assert "job 2 of 2" in message and "12000" in message and "10000" in message
    assert "max_request_jobs" in message
    assert daemon.call("queue", all=True)["jobs"] == []  # nothing was queued


def test_an_admin_sets_the_limits_in_the_config(daemon):
    path = os.path.join(daemon.fake.root, "config.toml")
    with open(path, "w") as f:
        f.write('[limits]\nmax_env_size = "1K"\nmax_array_tasks = 3\nmax_request_jobs = 4\n')
    daemon.env["BERTH_CONFIG"] = path
    daemon.start()
    message = _refused(daemon, "submit", job=_job(daemon, array="0-3"))
    assert "the array's tasks: 4" in message and "(3, [limits] max_array_tasks" in message
    message = _refused(daemon, "submit", job=_job(daemon, env={"X": "y" * 2000}))
    assert "max_env_size" in message
    message = _refused(daemon, "submit_all", jobs=[_job(daemon)] * 5)
    assert "from 1 to 4 jobs ([limits] max_request_jobs), not 5" in message
    assert daemon.call("submit_all", jobs=[_job(daemon, array="0-2"), _job(daemon)])["replies"]


def test_an_arrays_environment_is_stored_once(daemon):
    daemon.start()
    env = {"PATH": "/usr/bin:/bin", "BIG": "e" * (200 * 1024)}
    daemon.call("submit", job=_job(daemon, env=env, array="0-199"))  # (warm the database up)
    before = _db_bytes(daemon.state_dir)
    reply = daemon.call("submit", job=_job(daemon, env=env, array="0-499", argv=["echo", "hi"]))
    grown = _db_bytes(daemon.state_dir) - before
    assert grown < 4 * 2**20, f"500 tasks of a 200 KiB environment took {grown >> 20} MiB"
    store = Store.open(os.path.join(daemon.state_dir, "berth.db"))
    try:
        last = store.spec(reply["job_id"] + 499)
        assert last.env == env and last.argv == ("echo", "hi")
        assert last.array_task == (reply["job_id"], 499, 500, 0, 499)
        assert last.stdout_path and last.stdout_path.endswith(f"{reply['job_id']}_499.out")
    finally:
        store.close()


def test_a_version_5_database_loads_and_shared_specs_go_with_their_tasks(tmp_path):
    path = str(tmp_path / "berth.db")
    db = sqlite3.connect(path, isolation_level=None)
    for step in store_mod.MIGRATIONS[:5]:
        assert isinstance(step, str)
        for statement in step.split(";"):
            if statement.strip():
                db.execute(statement)
    db.execute("PRAGMA user_version=5")
    whole = json.dumps(_job(None, name="old"))  # a whole spec, as schema 5 stored it
    db.execute(
        "INSERT INTO jobs(id, uid, user, state, submitted_at, data, spec) "
        "VALUES (7, 0, 'root', 'COMPLETED', 1.0, '{}', ?)",
        (whole,),
    )
    db.close()
    st = Store.open(path)
    try:
        assert st.db.execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION
        assert st.spec(7).name == "old"
        spec = Store.insert_rows  # an array of two tasks, then each purged
        from berth.wire.jobspec import JobSpec

        base = JobSpec.from_dict(_job(None))
        tasks = [
            ({"id": i, "uid": 0, "user": "root", "state": "PENDING", "submit_time": 1.0},
             base.replace(array_task=(8, i - 8, 2, 0, 1), stdout_path=f"/tmp/{i}.out"))
            for i in (8, 9)
        ]  # fmt: skip
        with st.tx() as tx:
            for sql, rows in spec(tasks):
                tx.executemany(sql, rows)
        assert st.spec(9).stdout_path == "/tmp/9.out" and st.spec(9).argv == ("true",)
        count = "SELECT COUNT(*) FROM shared_specs"
        with st.tx() as tx:
            tx.execute(Store.PURGE_SQL, (8,))
        assert st.db.execute(count).fetchone()[0] == 1  # task 9 still needs it
        with st.tx() as tx:
            tx.execute(Store.PURGE_SQL, (9,))
        assert st.db.execute(count).fetchone()[0] == 0
    finally:
        st.close()


def test_a_batch_costs_the_same_however_many_jobs_its_user_has(daemon):
    """With max_jobs set, each job of a batch counted all its user's jobs again: a batch of
    10,000 stalled the daemon for seconds, more with each batch. Counted once per request,
    the fourth batch costs what the first did."""
    daemon.start(gpus=1)
    daemon.call("limits", set={"max_jobs": 1_000_000})
    took = []
    for _ in range(4):
        start = time.monotonic()
        daemon.call("submit_all", jobs=[_job(daemon)] * 2500)
        took.append(time.monotonic() - start)
    assert took[3] < 2 * took[0] + 0.5, f"batches took {took}"
    start = time.monotonic()
    victim = daemon.submit("true")
    daemon.wait_done([victim])
    assert time.monotonic() - start < 3.0  # (a second or so, on a loaded machine)


def test_two_batches_at_once_stay_within_max_jobs(tmp_path):
    """A batch yields to the loop while it is checked (others are served meanwhile): two
    batches of one user at once must not both pass ``max_jobs``."""
    import asyncio

    from enginekit import EngineRig

    from berth.daemon.engine.front import Front
    from berth.daemon.requests import server as admit

    rig = EngineRig(tmp_path, gpus=1)
    try:
        rig.engine.accounts.set(rig.store, "*", {"max_jobs": 400})
        job = {"argv": ["true"], "env": {"PATH": "/bin"}, "cwd": str(tmp_path), "hold": True}

        async def both() -> list[Any]:
            batch = {"jobs": [job] * 300}
            return await asyncio.gather(
                admit.submit_all(Front(rig.engine), rig.peer, batch),
                admit.submit_all(Front(rig.engine), rig.peer, batch),
                return_exceptions=True,
            )

        first, second = rig.loop.run_until_complete(both())
        assert isinstance(first, dict) and len(first["replies"]) == 300
        assert isinstance(second, Exception) and "the most allowed is 400" in str(second)
        assert len(rig.engine.jobs) == 300
    finally:
        rig.close()
