"""Supervisors are reused from job to job, and never outlive their purpose: an idle one goes
with its daemon (or after waiting long enough for work), a busy one after its attempt."""

from __future__ import annotations

import asyncio
import os

from helpers import wait_until

from berth.daemon.procs import pool as pool_mod
from berth.daemon.procs import spawner
from berth.daemon.supervisor import runfile


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (FileNotFoundError, ProcessLookupError):  # (ESRCH while it is being reaped)
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


class _PoolRig:
    """A Pool on a private event loop, with a real fork server; ``until(pred)`` turns the
    loop until ``pred()`` holds."""

    def __init__(self, tmp_path) -> None:
        self.tmp = tmp_path
        self.loop = asyncio.new_event_loop()
        self.done: list[tuple[int, dict]] = []
        self.gone: list[tuple[int, str, bool]] = []
        self.pool = pool_mod.Pool(
            self.loop,
            lambda j, a, r: self.done.append((j, r)),
            lambda j, a, why, started: self.gone.append((j, why, started)),
        )
        self.pool.spawner = spawner.Spawner()
        self.loop.add_reader(self.pool.spawner.sock.fileno(), self.pool.on_spawner_reply)

    def run(self, job: int, owner=(None, None, None), argv=("true",)) -> pool_mod.Slot:
        path = str(self.tmp / f"{job}.1")
        fd = runfile.open_run_file(path)
        spec = {
            "argv": list(argv), "env": {"PATH": os.environ["PATH"]}, "cwd": str(self.tmp),
            "stdout": str(self.tmp / "out"), "stderr": str(self.tmp / "out"),
            "time_limit": None, "kill_after": 5, "pty": False,
        }  # fmt: skip
        try:
            msg = {"job": job, "attempt": 1, "path": path, "spec": spec}
            return self.pool.run(owner, msg, [fd], [])
        finally:
            os.close(fd)

    def until(self, pred) -> None:
        def turned():
            self.loop.run_until_complete(asyncio.sleep(0))  # one turn: handle what came
            return pred()

        wait_until(turned, timeout=15, message="the pool's loop to get there")

    def close(self) -> None:
        self.pool.close()
        assert self.pool.spawner is not None
        self.pool.spawner.close()
        self.loop.close()


def test_an_idle_supervisor_that_died_is_passed_over(tmp_path):
    rig = _PoolRig(tmp_path)
    try:
        first = rig.run(1)
        rig.until(lambda: rig.done and first.pid is not None)
        assert first.pid is not None
        os.kill(first.pid, 9)
        wait_until(lambda: _gone(first.pid), message="killed")
        # Its end of file is not read yet: the next attempt finds it idle, and dead.
        second = rig.run(2)
        assert second is not first
        rig.until(lambda: len(rig.done) == 2)
        assert rig.done[1][0] == 2 and rig.done[1][1]["rc"] == 0
        assert rig.gone == []  # no attempt was lost with it
    finally:
        rig.close()


def test_a_supervisor_that_cannot_become_its_user_says_why(tmp_path):
    rig = _PoolRig(tmp_path)
    try:
        rig.run(1, owner=(-5, -5, "no-such-user-here"))
        rig.until(lambda: rig.gone)
        [(job, why, _started)] = rig.gone
        assert job == 1 and "could not start" in why, why
        assert not rig.done
    finally:
        rig.close()


def test_idle_supervisors_are_ended_after_a_while(tmp_path):
    """Pool.sweep with a clock moved past IDLE_SECONDS closes the idle one's channel."""
    rig = _PoolRig(tmp_path)
    loop, pool, done = rig.loop, rig.pool, rig.done
    try:
        owner = (None, None, None)
        slot = rig.run(1)
        rig.until(lambda: done and slot.pid is not None)
        assert done[0][0] == 1 and done[0][1]["rc"] == 0
        assert pool.idle[owner] == [slot]
        pool.sweep(loop.time() + pool_mod.IDLE_SECONDS / 2)
        assert pool.idle[owner] == [slot]  # not yet
        pool.sweep(loop.time() + pool_mod.IDLE_SECONDS + 1)
        assert owner not in pool.idle and slot.id not in pool.slots
        wait_until(lambda: _gone(slot.pid), message="the idle supervisor exits")
    finally:
        rig.close()


def test_a_jobs_claims_name_its_supervisor_and_the_job_whatever_becomes_of_the_daemon(daemon):
    import json

    daemon.start(gpus=2)
    marker = daemon.fake.root / "started"
    job = daemon.submit("sh", "-c", f"echo $$ > {marker}; exec sleep 60")
    wait_until(lambda: marker.exists() and marker.read_text().strip(), message="job started")
    job_pid = int(marker.read_text())

    def claim() -> dict | None:
        out = daemon.berth("status", "--json")
        claims = json.loads(out.stdout)["claims"]["claims"]
        return claims[0] if claims and job_pid in claims[0]["pids"] else None

    c = wait_until(claim, message="the claim names the job")
    assert c["command"] == f"sh -c echo $$ > {marker}; exec sleep 60"
    sup = [p for p in c["pids"] if p != job_pid]
    assert len(sup) == 1 and daemon.proc.pid not in c["pids"]
    daemon.kill9()
    c = claim()
    assert c is not None and not _gone(sup[0])  # still held, by live processes
    daemon.start(gpus=2)
    daemon.call("cancel", job_ids=[job])
    assert daemon.wait_done([job])[job]["state"] == "CANCELLED"
