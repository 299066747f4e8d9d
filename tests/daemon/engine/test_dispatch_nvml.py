"""Dispatch with jobs visible as GPU processes (issue 10): the daemon's NVML snapshot is up to
a poll interval old, and what it lists must be read right. A process a berth job started
(in its session, in a session of its own, or orphaned to its supervisor) is the job's, not
an outsider's; a listed process that has ended since the read holds nothing; a process
outside berth keeps its GPU busy for as long as it lives.

The daemon only learns of processes at its polls. To know that a poll has listed a job's
process, a test starts an outside *marker* process on another GPU after the job's process
registered, and waits until the daemon reports that GPU busy.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
import records
from helpers import wait_until


def _others(daemon: Any, gpu: int) -> dict[str, Any] | None:
    entry: dict[str, Any] = daemon.call("status")["gpus"][str(gpu)]
    return entry.get("others")


def _polled_since_now(daemon: Any, marker_gpu: int, timeout: float = 15) -> Any:
    """Start an outside workload on ``marker_gpu`` and wait until the daemon reports it: a
    poll has read NVML after every process registered before this call."""
    marker = daemon.fake.spawn_workload(visible=str(marker_gpu), mem="1G")
    wait_until(
        lambda: (o := _others(daemon, marker_gpu)) is not None and o["busy"],
        timeout=timeout,
        message=f"a poll lists the marker on GPU {marker_gpu}",
    )
    return marker


def _started(path: str, job: int) -> dict[str, Any] | None:
    return next(
        (e for e in records.read(path) if e["event"] == "start" and e["job"] == str(job)), None
    )


def test_a_freed_gpu_starts_the_next_job_at_once_though_the_last_poll_lists_the_ended_job(
    daemon,
):
    daemon.fake.setup(n=2, memory="80G")
    daemon.start("--poll-interval", "3", gpus=None)  # polls at ~3 s, ~6 s, ...
    first = daemon.submit(*daemon.workload("--record", daemon.record), gpu_ids=[0])
    start = wait_until(lambda: _started(daemon.record, first), message="the first job runs")
    second = daemon.submit(*daemon.workload("--seconds", "0.05"), gpu_ids=[0])
    _polled_since_now(daemon, marker_gpu=1)  # the daemon's snapshot lists the first job
    assert _others(daemon, 0) is None  # the running job's process is berth's own
    os.kill(start["pid"], signal.SIGTERM)  # the first job ends (by itself, for the daemon)
    rows = daemon.wait_done([first, second], timeout=20)
    assert rows[second]["state"] == "COMPLETED"
    ended = daemon.job(first)["attempts"][-1]["end"]
    began = daemon.job(second)["attempts"][0]["start"]
    # The next poll is ~3 s away: only a dispatch that reads the stale snapshot right is fast.
    assert began - ended < 0.5, f"the freed GPU stayed idle {began - ended:.3f} s"


def test_a_jobs_processes_in_other_sessions_or_orphaned_are_the_jobs_not_outsiders(daemon):
    daemon.fake.setup(n=3, memory="80G")
    daemon.start("--poll-interval", "0.3", gpus=None)
    work = [sys.executable, daemon.workload()[1], "--mem", "1G", "--record", daemon.record]
    cmd = " ".join(work)
    # GPU 0: the GPU process is the job's child in a session of its own (setsid -w forks).
    in_session = daemon.submit(wrap=f"setsid -w {cmd}", gpu_ids=[0], gpus=0.5)
    # GPU 1: the GPU process left its parent and session: an orphan of the job's supervisor.
    orphan = daemon.submit(wrap=f"(setsid {cmd} &); exec sleep 60", gpu_ids=[1], gpus=0.5)
    wait_until(
        lambda: _started(daemon.record, in_session) and _started(daemon.record, orphan),
        message="both jobs' GPU processes run",
    )
    _polled_since_now(daemon, marker_gpu=2)
    assert _others(daemon, 0) is None, "a job's process in its own session counted as outside"
    assert _others(daemon, 1) is None, "an orphaned process of a job counted as outside"
    # So the other halves of both GPUs are free for queued jobs.
    halves = [daemon.submit(*daemon.workload("--seconds", "0.05"), gpu_ids=[g], gpus=0.5)
              for g in (0, 1)]  # fmt: skip
    rows = daemon.wait_done(halves, timeout=20)
    assert {r["state"] for r in rows.values()} == {"COMPLETED"}
    assert {daemon.job(j)["state"] for j in (in_session, orphan)} == {"RUNNING"}
    daemon.call("cancel", job_ids=[in_session, orphan])
    daemon.wait_done([in_session, orphan])


def test_an_outside_process_keeps_a_gpu_a_job_freed_busy_until_it_ends(daemon):
    daemon.fake.setup(n=2, memory="80G")
    daemon.start("--poll-interval", "0.3", gpus=None)
    first = daemon.submit(*daemon.workload("--record", daemon.record), gpu_ids=[0])
    start = wait_until(lambda: _started(daemon.record, first), message="the first job runs")
    squatter = daemon.fake.spawn_workload(visible="0", mem="1G")  # not berth's, on GPU 0
    wait_until(lambda: (o := _others(daemon, 0)) is not None and o["busy"], message="seen")
    second = daemon.submit(*daemon.workload("--seconds", "0.05"), gpu_ids=[0])
    os.kill(start["pid"], signal.SIGTERM)
    daemon.wait_done([first])
    marker = _polled_since_now(daemon, marker_gpu=1)  # a poll after the first job ended
    job = daemon.job(second)
    assert job["state"] == "PENDING" and job["reason"].startswith("Resources")
    marker.terminate()
    squatter.terminate()
    squatter.wait()
    rows = daemon.wait_done([second], timeout=20)
    assert rows[second]["state"] == "COMPLETED"


def _ticks() -> float:
    """Now, in the clock ticks of /proc/PID/stat's start times (since boot)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK")


def _take_pid(pid: int) -> subprocess.Popen[bytes] | None:
    """A new process with ``pid`` (a reused pid), through ns_last_pid (needs privilege)."""
    for _ in range(20):
        try:
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(pid - 1))
        except OSError:
            return None
        proc = subprocess.Popen(["sleep", "60"])
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    return None


def test_a_listed_pid_counts_while_its_process_lives_not_once_it_ended_or_was_reused(fake_gpus):
    from berth import config
    from berth.claims.ledger import Ledger
    from berth.daemon.engine.resources import Resources

    fake_gpus.setup(n=1)
    outsider = subprocess.Popen(["sleep", "60"])  # not berth's; NVML lists it (a static entry)
    pid = outsider.pid
    fake_gpus.update(0, processes=[{"pid": pid, "used_memory": 2**30, "type": "compute"}])
    ledger = Ledger(fake_gpus.claims_dir)
    res = Resources(config.get(), ledger)
    res.poll()

    def busy() -> bool:
        use = res.others(ledger.scan(), set(), dict).get(0)
        return use is not None and use.busy

    assert busy()  # alive, outside berth
    outsider.kill()
    outsider.wait()
    assert not busy()  # listed by the last read, ended since: it holds nothing
    # Start times have a clock tick's resolution; a process NVML lists has lived far longer.
    born = _ticks()
    wait_until(lambda: _ticks() > born + 1, timeout=2, message="a clock tick passes")
    reused = _take_pid(pid)
    if reused is None:
        pytest.skip("cannot choose the pid of a new process (needs CAP_SYS_ADMIN)")
    try:
        assert not busy()  # the pid is another process's now, born after the read
        res.poll()
        assert busy()  # a new read lists it alive: it counts
    finally:
        reused.kill()
        reused.wait()


def test_a_listed_pid_that_did_not_exist_at_the_read_stays_outside(fake_gpus):
    """(NVML may list pids of another PID namespace, which we cannot see.)"""
    from berth import config
    from berth.claims.ledger import Ledger
    from berth.daemon.engine.resources import Resources

    fake_gpus.setup(n=1)
    gone = subprocess.Popen(["true"])
    gone.wait()
    fake_gpus.update(0, processes=[{"pid": gone.pid, "used_memory": 2**30, "type": "compute"}])
    ledger = Ledger(fake_gpus.claims_dir)
    res = Resources(config.get(), ledger)
    res.poll()
    use = res.others(ledger.scan(), set(), dict)[0]
    assert use.busy and use.mem == 2**30
