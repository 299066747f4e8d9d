"""A job's processes never outlive the record of them: when its supervisor is killed (kill -9)
the job is recorded LOST only once its processes, even those that left its session, have been
ended, so its GPU is free again for the next job; and the same when the daemon finds such an
attempt on start."""

from __future__ import annotations

import os
import signal
from typing import Any

from helpers import alive, wait_until

from berth.daemon.supervisor.runfile import read_run_file


def _start_job(daemon: Any) -> tuple[int, int, int, int]:
    """A job whose child escapes its session; (job id, supervisor, leader, escaped child)."""
    child_file = os.path.join(daemon.fake.root, "child.pid")
    job = daemon.submit(
        "sh", "-c", f"setsid sleep 300 & echo $! > {child_file}; exec sleep 300", gpu_ids=[0]
    )
    run = os.path.join(daemon.state_dir, "run", f"{job}.1")
    info = wait_until(
        lambda: (i := read_run_file(run)).get("job") and os.path.exists(child_file) and i,
        message="job started",
    )
    child = int(wait_until(lambda: open(child_file).read().strip(), message="child pid"))
    wait_until(lambda: os.getsid(child) == child, message="the child left the job's session")
    return job, int(info["sup"]), int(info["job"]), child


def test_killed_supervisor_takes_its_job_along_and_frees_the_gpu(daemon: Any) -> None:
    daemon.start()
    job, sup, leader, child = _start_job(daemon)
    nxt = daemon.submit("true", gpu_ids=[0])
    assert daemon.job(nxt)["state"] == "PENDING"
    os.kill(sup, signal.SIGKILL)
    row = wait_until(
        lambda: (j := daemon.job(job))["state"] == "LOST" and j, message="job recorded LOST"
    )
    why = row["attempts"][-1]["reason"]
    assert "supervisor died" in why and "process(es) were ended" in why
    wait_until(lambda: not alive(leader) and not alive(child), message="job processes end")
    daemon.wait_done([nxt])
    assert daemon.job(nxt)["state"] == "COMPLETED"  # the GPU was free again


def test_supervisor_killed_while_the_daemon_is_down(daemon: Any) -> None:
    daemon.start()
    job, sup, leader, child = _start_job(daemon)
    daemon.kill9()
    os.kill(sup, signal.SIGKILL)
    wait_until(lambda: not alive(sup), message="supervisor gone")
    assert alive(leader) and alive(child)
    daemon.start()
    row = daemon.job(job)
    assert row["state"] == "LOST" and "process(es) were ended" in row["attempts"][-1]["reason"]
    wait_until(lambda: not alive(leader) and not alive(child), message="job processes end")
