"""A full state disk fails no job (issue 41.7; DESIGN.md invariant 10), through the real
daemon and CLI, with the state dir on a small tmpfs filled to its last byte:

- a queued job whose turn comes while its start cannot be recorded stays PENDING
  (``StateDiskFull``, naming the path), burns no retry and no attempt, and runs once space
  returns; ``berth queue``/``status``, ``/metrics`` and the log say the disk is full;
- ``berth release-job`` on the full disk says what it did (released, not yet saved), not
  "nothing was changed";
- ``kill -TERM`` of the daemon on the full disk stops it cleanly (no traceback), its log
  naming what it could not save, and a restart once space returns loses no job.
"""

from __future__ import annotations

import os
import socket
import subprocess
import urllib.request
from typing import Any

import pytest
from helpers import wait_until

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="mounts a small tmpfs (CI runs as root)"
)


class FullDisk:
    """The daemon's state dir on a 16 MiB tmpfs that :meth:`fill` fills to the last byte and
    :meth:`free` empties again."""

    def __init__(self, daemon: Any) -> None:
        self.daemon = daemon
        self.filler = os.path.join(daemon.state_dir, "filler")

    def fill(self) -> None:
        with open(self.filler, "ab", buffering=0) as f:
            for size in (65536, 512, 1):
                try:
                    while f.write(b"\0" * size):
                        pass
                except OSError:
                    pass

    def free(self) -> None:
        os.unlink(self.filler)


@pytest.fixture
def full(daemon: Any) -> Any:
    os.makedirs(daemon.state_dir, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", daemon.state_dir],
        check=True,
    )
    try:
        yield FullDisk(daemon)
    finally:
        daemon.cleanup()
        subprocess.run(["umount", "-l", daemon.state_dir], check=False)


def _blocker(daemon: Any) -> tuple[int, str]:
    """A job on the only GPU until the file it names exists (its command has started)."""
    gate = os.path.join(daemon.fake.root, "gate")
    began = os.path.join(daemon.fake.root, "began")
    job = daemon.submit(
        "sh", "-c", f"touch {began}; while [ ! -e {gate} ]; do sleep 0.01; done", gpus=1
    )
    wait_until(lambda: os.path.exists(began), timeout=20, message="the blocker's command runs")
    return job, gate


def _log(daemon: Any) -> str:
    with open(daemon.log) as f:
        return f.read()


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return int(s.getsockname()[1])


def _metric(port: int, name: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return next((ln for ln in text.splitlines() if ln.startswith(name + " ")), "")


def test_queued_jobs_wait_on_a_full_state_disk_and_run_when_space_returns(full: Any) -> None:
    daemon = full.daemon
    daemon.fake.setup(n=1)
    port = _free_port()
    daemon.start("--http", f"127.0.0.1:{port}", gpus=None)
    _, gate = _blocker(daemon)
    queued = [daemon.submit("true", gpus=1, retries=1) for _ in range(3)]
    full.fill()
    open(gate, "w").close()  # the blocker ends: the first queued job's turn comes

    def waits_for_space() -> str | None:
        rows = daemon.call("queue", all=True)["jobs"]
        said = [r["reason_detail"] for r in rows if r["reason"] == "StateDiskFull"]
        return said[0] if said else None

    def states() -> dict[int, str]:
        return {r["id"]: r["state"] for r in daemon.call("queue", all=True)["jobs"]}

    shown = wait_until(
        waits_for_space, timeout=30, interval=0.1,
        message=f"a queued job shown waiting for space (states: {states()})",
    )  # fmt: skip
    assert daemon.state_dir in shown, shown  # (the reason names the path)
    assert "StateDiskFull" in daemon.berth("queue").stdout
    assert all(states()[i] == "PENDING" for i in queued), states()
    status = daemon.berth("status")
    assert "the state disk is full" in status.stdout, status.stdout + status.stderr
    assert _metric(port, "berth_state_disk_full") == "berth_state_disk_full 1"
    assert _log(daemon).count("the state disk is full") == 1

    full.free()  # space returns: the jobs run, each once, no retry burned
    done = daemon.wait_done(queued, timeout=60)
    assert {i: r["state"] for i, r in done.items()} == dict.fromkeys(queued, "COMPLETED")
    for i in queued:
        job = daemon.job(i)
        assert len(job["attempts"]) == 1, job["attempts"]
    wait_until(
        lambda: _metric(port, "berth_state_disk_full") == "berth_state_disk_full 0",
        timeout=20, message="the gauge says the disk has room again",
    )  # fmt: skip
    log = _log(daemon)
    assert log.count("the state disk is full") == 1
    assert log.count("the state disk has room again") == 1
    assert "the state disk is full" not in daemon.berth("status").stdout


def test_release_job_on_a_full_disk_says_what_it_did(full: Any) -> None:
    daemon = full.daemon
    daemon.fake.setup(n=1)
    daemon.start(gpus=None)
    job = daemon.submit("true", gpus=1, hold=True)
    other = daemon.submit("true", gpus=1, hold=True)
    full.fill()
    r = daemon.berth("release-job", str(job))
    held = daemon.job(job)["held"]
    if r.returncode != 0:  # refused: then truly nothing was changed
        assert held, f"it answered {r.stderr!r} but released the job"
    else:
        assert not held
        assert f"job {job} released" in r.stdout
    assert "nothing was changed" not in r.stdout + r.stderr or held
    r = daemon.berth("update", str(other), "-J", "renamed")  # (the same for update)
    renamed = daemon.job(other)["name"] == "renamed"
    assert (r.returncode == 0) == renamed, (r.stdout, r.stderr, renamed)
    if "not saved yet" not in r.stderr:  # (a commit that went through: nothing to warn)
        assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    else:  # commits fail: a cancel is done in memory and says it is not saved yet
        c = daemon.berth("cancel", str(other))
        assert c.returncode == 0 and f"job {other}: cancelled (not saved yet" in c.stdout, c
        assert daemon.job(other)["state"] == "CANCELLED"
    wait_until(
        lambda: "StateDiskFull" in daemon.berth("queue").stdout,
        timeout=30, interval=0.1, message="the released job waits for space",
    )  # fmt: skip
    assert daemon.job(job)["state"] == "PENDING"
    full.free()
    assert daemon.wait_done([job], timeout=60)[job]["state"] == "COMPLETED"


def test_term_on_a_full_disk_stops_cleanly_and_loses_nothing(full: Any) -> None:
    daemon = full.daemon
    daemon.fake.setup(n=1)
    daemon.start(gpus=None)
    blocker, gate = _blocker(daemon)
    queued = [daemon.submit("true", gpus=1) for _ in range(2)]
    full.fill()
    open(gate, "w").close()  # the blocker ends, unsaved; the next job's start cannot be

    def blocker_ended() -> bool:
        rows = {r["id"]: r["state"] for r in daemon.call("queue", all=True)["jobs"]}
        return rows.get(blocker) == "COMPLETED"

    wait_until(blocker_ended, timeout=30, message="the blocker's end is known (not saved)")
    assert daemon.proc is not None
    daemon.proc.terminate()
    assert daemon.proc.wait(timeout=30) == 0
    log = _log(daemon)
    assert "Traceback" not in log, log
    assert "stopped without saving" in log and f"job {blocker} (COMPLETED)" in log, log
    full.free()
    daemon.start(gpus=None)
    done = daemon.wait_done([blocker, *queued], timeout=60)
    assert {i: r["state"] for i, r in done.items()} == dict.fromkeys(
        [blocker, *queued], "COMPLETED"
    )
