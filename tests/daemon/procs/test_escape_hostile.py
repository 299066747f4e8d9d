"""A job that tries to outlive its record, and a user who stops their job's supervisor.

One job, one cgroup that nothing escapes (where the daemon can make cgroups: root, a writable
cgroup hierarchy): a child that leaves the job's session (``setsid``, a double fork) and closes
every descriptor it inherited (so it holds no claim and is in no session the daemon knows) is
still killed when the job is cancelled and when its supervisor dies. And a supervisor stopped
by ``kill -STOP`` (it runs as the job's user, who may do that) does not keep a job running past
its time limit or an admin's cancel: the daemon continues it, then kills it and the job,
within a bound (berth.daemon.procs.overdue).
"""

from __future__ import annotations

import os
import pwd
import signal
import sys
import threading
import time
from typing import Any

import pytest
from helpers import wait_until

from berth.daemon.procs import cgroup, overdue
from berth.daemon.supervisor.runfile import read_run_file

# The leader forks a child that makes a session of its own, forks again (so it is nobody's
# child in the job) and closes every descriptor it had: the claims' too. Then both sleep.
ESCAPER = """
import os, sys, time
if os.fork() == 0:
    if os.fork():
        os._exit(0)
    os.setsid()
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    os.closerange(0, 65536)
    time.sleep(300)
    os._exit(0)
time.sleep(300)
"""

KILL_AFTER = 0.5
# The overdue watch's periods, set short ([daemon] supervisor_grace, supervisor_last_chance;
# 5 s and 3 s by default: the bound below would not hold with them).
GRACE, LAST_CHANCE = 1.0, 1.0
LATE = f'[daemon]\nsupervisor_grace = "{GRACE:g}s"\nsupervisor_last_chance = "{LAST_CHANCE:g}s"\n'
BOUND = KILL_AFTER + GRACE + LAST_CHANCE + 4.0  # (+ a loaded machine's delays)
assert BOUND < KILL_AFTER + overdue.GRACE + overdue.LAST_CHANCE


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    return _state(pid) not in ("", "Z")


def _late(daemon: Any) -> None:
    """The daemon's overdue watch with the short periods above (its config file)."""
    config = daemon.fake.root / "config.toml"
    config.write_text(LATE)
    daemon.env["BERTH_CONFIG"] = str(config)


def _escaper(daemon: Any, **job: Any) -> tuple[int, int, int]:
    """A job whose child escaped (see ESCAPER): (job id, its supervisor, the child)."""
    child_file = os.path.join(daemon.fake.root, f"child-{time.monotonic_ns()}.pid")
    job_id = daemon.submit(sys.executable, "-c", ESCAPER, child_file, gpu_ids=[0], **job)
    run = os.path.join(daemon.state_dir, "run", f"{job_id}.1")
    info = wait_until(lambda: (i := read_run_file(run)).get("job") and i, message="job started")
    child = int(wait_until(lambda: os.path.exists(child_file) and open(child_file).read()))
    wait_until(lambda: os.getsid(child) == child, message="the child has its own session")
    wait_until(lambda: len(os.listdir(f"/proc/{child}/fd")) == 0, message="it closed its fds")
    return job_id, int(info["sup"]), child


class Stopper:
    """A user who keeps their supervisor stopped: SIGSTOP again every 10 ms (so a SIGCONT
    from the daemon buys it little), until told to stop or the supervisor has gone. With
    ``user``, from a process of that user (as the job's user would)."""

    def __init__(self, pid: int, user: str | None = None) -> None:
        self.pid = pid
        self.user = user
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.proc = 0
        if user is None:
            self.thread.start()
        else:
            self.proc = _fork_as(user, self._run)
        wait_until(lambda: _state(pid) == "T", message="the supervisor is stopped")

    def _run(self) -> None:
        while True:
            try:
                os.kill(self.pid, signal.SIGSTOP)
            except ProcessLookupError:
                return
            if self.done.wait(0.01):
                return

    def __enter__(self) -> Stopper:
        return self

    def __exit__(self, *_: object) -> None:
        if self.proc:
            os.kill(self.proc, signal.SIGKILL)
            os.waitpid(self.proc, 0)
        else:
            self.done.set()
            self.thread.join()
        try:
            os.kill(self.pid, signal.SIGCONT)  # (if it lives on: for the clean-up)
        except ProcessLookupError:
            pass


def _fork_as(user: str, fn: Any) -> int:
    pw = pwd.getpwnam(user)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
            fn()
        finally:
            os._exit(0)
    return pid


def _tracked() -> bool:
    probe = "/nonexistent-state-for-the-probe"
    try:
        return os.geteuid() == 0 and cgroup.find(probe)[0] is not None
    finally:
        cgroup.remove_all(probe)


TRACKED = _tracked()
needs_cgroups = pytest.mark.skipif(
    not TRACKED, reason="needs root and a writable cgroup hierarchy (docs/admin.md)"
)


@needs_cgroups
def test_an_escaped_child_dies_with_its_killed_supervisor(daemon: Any) -> None:
    daemon.start("--kill-after", str(KILL_AFTER))
    job, sup, child = _escaper(daemon)
    nxt = daemon.submit("true", gpu_ids=[0])
    os.kill(sup, signal.SIGKILL)
    assert daemon.wait_done([job])[job]["state"] == "LOST"
    wait_until(lambda: not _alive(child), timeout=10, message="the escaped child is killed")
    assert daemon.wait_done([nxt])[nxt]["state"] == "COMPLETED"
    with open(daemon.log) as f:  # (said at start)
        assert "each job's processes tracked by a cgroup" in f.read()


def test_an_escaped_child_dies_when_its_job_is_cancelled(daemon: Any) -> None:
    daemon.start("--kill-after", str(KILL_AFTER))
    job, _, child = _escaper(daemon)
    daemon.call("cancel", job_ids=[job])
    assert daemon.wait_done([job])[job]["state"] == "CANCELLED"
    wait_until(lambda: not _alive(child), timeout=10, message="the escaped child is killed")


def test_a_stopped_supervisor_does_not_stop_a_cancel(daemon: Any) -> None:
    _late(daemon)
    daemon.start("--kill-after", str(KILL_AFTER))
    job, sup, child = _escaper(daemon)
    with Stopper(sup):
        began = time.monotonic()
        daemon.call("cancel", job_ids=[job])
        row = daemon.wait_done([job], timeout=BOUND + 10)[job]
        took = time.monotonic() - began
    assert row["state"] == "CANCELLED" and took < BOUND, (row, took)
    if TRACKED:  # (else only the supervisor as a subreaper, if it could go on, finds it)
        wait_until(lambda: not _alive(child), timeout=10, message="the escaped child is killed")
    with open(daemon.log) as f:  # (continued, it may have done it; else it was killed)
        assert "has not carried out its cancel in time" in f.read()


def test_a_stopped_supervisor_does_not_stop_a_time_limit(daemon: Any) -> None:
    _late(daemon)
    daemon.start("--kill-after", str(KILL_AFTER))
    limit = 1.0
    job, sup, child = _escaper(daemon, time_limit=limit)
    with Stopper(sup):
        began = time.monotonic()
        row = daemon.wait_done([job], timeout=limit + BOUND + 10)[job]
        took = time.monotonic() - began
    assert row["state"] == "TIMEOUT" and took < limit + BOUND, (row, took)
    if TRACKED:
        wait_until(lambda: not _alive(child), timeout=10, message="the escaped child is killed")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")
def test_a_user_who_stops_their_own_supervisor_cannot_outlast_an_admins_cancel(
    daemon: Any,
) -> None:
    from test_system_mode import System
    from userkit import A

    system = System(daemon)
    with open(system.config) as f:
        config = f.read()
    with open(system.config, "w") as f:  # (the overdue watch's short periods: LATE)
        f.write(config.replace("[daemon]\n", LATE))
    system.start("--kill-after", str(KILL_AFTER))
    child_file = os.path.join(system.shared, "child.pid")
    spec = {"argv": ["/usr/bin/python3", "-c", ESCAPER, child_file], "cwd": "/",
            "env": {"PATH": "/usr/bin:/bin"}, "gpu_ids": [0]}  # fmt: skip
    job = int(system.call(A, "submit", job=spec)["ok"]["job_id"])
    run = os.path.join(system.state, "run", f"{job}.1")
    sup = int(wait_until(lambda: read_run_file(run).get("job") and read_run_file(run)["sup"]))
    child = int(wait_until(lambda: os.path.exists(child_file) and open(child_file).read()))
    with open(f"/proc/{sup}/status") as f:  # the supervisor runs as the job's user
        uid = next(line.split()[1:] for line in f if line.startswith("Uid:"))
    assert set(uid) == {str(pwd.getpwnam(A).pw_uid)}
    with Stopper(sup, user=A):
        began = time.monotonic()
        daemon.call("cancel", job_ids=[job])  # (root: an admin)
        row = daemon.wait_done([job], timeout=BOUND + 10)[job]
        took = time.monotonic() - began
    assert row["state"] == "CANCELLED" and took < BOUND, (row, took)
    if TRACKED:
        wait_until(lambda: not _alive(child), timeout=10, message="the escaped child is killed")
