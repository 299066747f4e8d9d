"""A start that cannot be made for want of file descriptors fails no job (DESIGN.md invariant
10), through the real daemon: its file table is made full by lowering its ``RLIMIT_NOFILE``
(``prlimit`` on its pid) to its lowest free descriptor, so that nothing new opens.

- the queued job whose turn comes then never ends FAILED: it stays PENDING, the log says why
  (``SystemLimit``), no attempt is counted;
- the daemon survives (no crash, no traceback) and, the limit raised again, accepts requests
  and runs the job, exactly once.
"""

from __future__ import annotations

import os
import resource
from typing import Any

from helpers import wait_until


def _lowest_free(pid: int) -> int:
    used = {int(n) for n in os.listdir(f"/proc/{pid}/fd")}
    return next(n for n in range(len(used) + 1) if n not in used)


def _log(daemon: Any) -> str:
    with open(daemon.log) as f:
        return f.read()


def test_a_start_without_descriptors_waits_and_runs_once_they_are_back(daemon: Any) -> None:
    daemon.fake.setup(n=1)
    daemon.start(gpus=None)
    gate = os.path.join(daemon.fake.root, "gate")
    began = os.path.join(daemon.fake.root, "began")
    daemon.submit("sh", "-c", f"touch {began}; while [ ! -e {gate} ]; do sleep 0.01; done", gpus=1)
    wait_until(lambda: os.path.exists(began), timeout=20, message="the blocker's command runs")
    ran = os.path.join(daemon.fake.root, "ran")
    queued = daemon.submit("sh", "-c", f"echo x >> {ran}", gpus=1)
    assert daemon.proc is not None
    pid = daemon.proc.pid
    limits = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (_lowest_free(pid), limits[1]))
    try:
        open(gate, "w").close()  # the blocker ends: the queued job's turn comes, no descriptor
        wait_until(
            lambda: "(SystemLimit)" in _log(daemon) or f"job {queued}: cannot" in _log(daemon)
            or daemon.proc.poll() is not None,
            timeout=30, interval=0.05, message="the daemon says starts meet a limit",
        )  # fmt: skip
        assert not os.path.exists(ran)
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
    assert daemon.proc.poll() is None, _log(daemon)  # it survived
    done = daemon.wait_done([queued], timeout=60)
    assert done[queued]["state"] == "COMPLETED", daemon.job(queued)
    job = daemon.job(queued)
    assert len(job["attempts"]) == 1, job["attempts"]
    assert "FAILED" not in [e.get("state") for e in job.get("history", ())], job["history"]
    with open(ran) as f:
        assert f.read() == "x\n"  # it ran exactly once
    log = _log(daemon)
    assert "SystemLimit" in log and "Too many open files" in log, log
    assert "Traceback" not in log, log
    assert "starts go through again" in log, log


def test_a_supervisor_without_descriptors_never_fails_its_job(daemon: Any) -> None:
    """The user's own supervisor has no descriptor left (its limit lowered, as its user may
    with ``prlimit``): the attempt handed to it never runs, its job waits alone (nobody else's
    start is held back) and runs, once, under a fresh supervisor."""
    daemon.fake.setup(n=1)
    daemon.start(gpus=None)
    told = os.path.join(daemon.fake.root, "sup")
    first = daemon.submit("sh", "-c", f"echo $PPID > {told}", gpus=1)  # (its supervisor)
    daemon.wait_done([first])
    with open(told) as f:
        sup = int(f.read())
    limits = resource.prlimit(sup, resource.RLIMIT_NOFILE)
    resource.prlimit(sup, resource.RLIMIT_NOFILE, (_lowest_free(sup), limits[1]))
    ran = os.path.join(daemon.fake.root, "ran")
    job = daemon.submit("sh", "-c", f"echo x >> {ran}", gpus=1)
    done = daemon.wait_done([job], timeout=60)
    assert done[job]["state"] == "COMPLETED", daemon.job(job)
    shown = daemon.job(job)
    assert len(shown["attempts"]) == 1, shown["attempts"]
    assert "FAILED" not in [e.get("state") for e in shown["history"]], shown["history"]
    with open(ran) as f:
        assert f.read() == "x\n"  # it ran exactly once
    log = _log(daemon)
    assert f"job {job}: not started, it waits" in log and "descriptor" in log, log
    assert "(SystemLimit)" not in log  # (its own limit: nobody else's start waited)
    assert daemon.proc is not None and daemon.proc.poll() is None
