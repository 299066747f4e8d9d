"""Supervisors are reused from job to job, and never outlive their purpose: an idle one goes
with its daemon (or after waiting long enough for work), a busy one after its attempt."""

from __future__ import annotations

import asyncio
import os

from helpers import wait_until

from berth.daemon import pool as pool_mod
from berth.daemon import runfile, spawner


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except FileNotFoundError:
        return True


def test_one_supervisor_runs_successive_jobs_and_an_adopted_one_finishes_alone(daemon):
    daemon.start(gpus=1)
    parents = daemon.fake.root / "parents"
    script = f'echo "$PPID" >> {parents}'
    ids = [daemon.submit("sh", "-c", script) for _ in range(3)]
    rows = daemon.wait_done(ids)
    assert {r["state"] for r in rows.values()} == {"COMPLETED"}
    pids = {int(line) for line in parents.read_text().split()}
    assert len(pids) == 1, pids  # the job's parent, its supervisor, served all three
    [sup] = pids
    # The same supervisor takes a long job; the daemon dies; a new one adopts the attempt.
    marker = daemon.fake.root / "ran"
    long_id = daemon.submit("sh", "-c", f'echo "$PPID" >> {parents}; echo x >> {marker}; sleep 1')
    wait_until(lambda: marker.exists(), message="long job started")
    assert int(parents.read_text().split()[-1]) == sup
    daemon.kill9()
    daemon.start(gpus=1)
    row = daemon.wait_done([long_id])[long_id]
    assert row["state"] == "COMPLETED" and row["exit_code"] == 0
    assert marker.read_text() == "x\n"  # it ran once
    wait_until(lambda: _gone(sup), message="the adopted supervisor exits after its attempt")


def test_an_idle_supervisor_leaves_with_its_daemon(daemon):
    daemon.start(gpus=1)
    parents = daemon.fake.root / "parents"
    job = daemon.submit("sh", "-c", f'echo "$PPID" > {parents}')
    daemon.wait_done([job])
    sup = int(parents.read_text())
    assert not _gone(sup)  # kept, idle, for the next job
    daemon.kill9()
    wait_until(lambda: _gone(sup), message="the idle supervisor exits with its daemon")


def test_idle_supervisors_are_ended_after_a_while(tmp_path):
    """Pool.sweep with a clock moved past IDLE_SECONDS closes the idle one's channel."""
    loop = asyncio.new_event_loop()
    done: list[tuple[int, dict]] = []
    pool = pool_mod.Pool(loop, lambda j, a, r: done.append((j, r)), lambda *a: None)
    pool.spawner = spawner.Spawner()
    loop.add_reader(pool.spawner.sock.fileno(), pool.on_spawner_reply)
    try:
        path = str(tmp_path / "1.1")
        fd = runfile.open_run_file(path)
        spec = {
            "argv": ["true"], "env": {"PATH": os.environ["PATH"]}, "cwd": str(tmp_path),
            "stdout": str(tmp_path / "out"), "stderr": str(tmp_path / "out"),
            "time_limit": None, "kill_after": 5, "pty": False,
        }  # fmt: skip
        owner = (None, None, None)
        slot = pool.run(owner, {"job": 1, "attempt": 1, "path": path, "spec": spec}, [fd])
        os.close(fd)

        def until(pred):
            deadline = loop.time() + 15
            while not pred():
                assert loop.time() < deadline, "timed out"
                loop.run_until_complete(asyncio.sleep(0.01))

        until(lambda: done and slot.pid is not None)
        assert done[0][0] == 1 and done[0][1]["rc"] == 0
        assert pool.idle[owner] == [slot]
        pool.sweep(loop.time() + pool_mod.IDLE_SECONDS / 2)
        assert pool.idle[owner] == [slot]  # not yet
        pool.sweep(loop.time() + pool_mod.IDLE_SECONDS + 1)
        assert owner not in pool.idle and slot.id not in pool.slots
        wait_until(lambda: _gone(slot.pid), message="the idle supervisor exits")
    finally:
        pool.close()
        pool.spawner.close()
        loop.close()
