"""Acceptance: time limits kill the whole process group; requeue, retries, cancel, hold,
pause (issue 4)."""

from __future__ import annotations

import os

import records
from helpers import wait_until


def _gone(pgid: int) -> bool:
    """No living (non-zombie) process is left in the process group."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return False
    return True


def test_time_limit_kills_the_whole_process_group_and_records_timeout(daemon):
    daemon.start("--kill-after", "0.5")
    # The leader ignores SIGTERM (so SIGKILL after the grace is needed); it has 2 children.
    work = daemon.workload("--seconds", "60", "--children", "2", "--ignore-term",
                           "--record", daemon.record)  # fmt: skip
    job_id = daemon.submit(*work, time_limit=0.5)
    row = daemon.wait_done([job_id], timeout=15)[job_id]
    assert row["state"] == "TIMEOUT"
    start = next(e for e in records.read(daemon.record) if e["event"] == "start")
    assert _gone(start["pid"])  # leader and children: the whole group is gone
    assert daemon.job(job_id)["attempts"][0]["outcome"] == "TIMEOUT"


def test_max_job_time_applies_to_every_job(daemon):
    daemon.start("--max-job-time", "0.3", "--kill-after", "0.2")
    job_id = daemon.submit(*daemon.workload("--seconds", "60"))
    assert daemon.wait_done([job_id], timeout=15)[job_id]["state"] == "TIMEOUT"


def test_requeue_at_the_time_limit_puts_the_job_back_and_it_runs_again(daemon):
    daemon.start("--kill-after", "0.2")
    # BERTH_ATTEMPT tells the job it runs again (resume from its checkpoint).
    script = 'echo "attempt $BERTH_ATTEMPT"; [ "$BERTH_ATTEMPT" -ge 2 ] || exec sleep 60'
    job_id = daemon.submit(wrap=script, time_limit=0.5, requeue=True)
    row = daemon.wait_done([job_id], timeout=15)[job_id]
    assert row["state"] == "COMPLETED"
    job = daemon.job(job_id)
    assert [a["outcome"] for a in job["attempts"]] == ["PREEMPTED", "COMPLETED"]
    assert "PREEMPTED" in [h["state"] for h in job["history"]]
    assert daemon.berth("logs", str(job_id)).stdout == "attempt 1\nattempt 2\n"


def test_retries_rerun_a_failed_job(daemon):
    daemon.start()
    counter = os.path.join(daemon.fake.root, "count")
    script = f"echo x >> {counter}; [ $(wc -l < {counter}) -ge 2 ]"
    job_id = daemon.submit(wrap=script, retries=2)
    # The first retry waits its backoff (10 s by default): shorten it by checking the state.
    wait_until(
        lambda: (daemon.job(job_id)["reason"] or "").startswith("BeginTime"),
        timeout=10,
        message="backoff",
    )
    job = daemon.job(job_id)
    assert job["attempts"][0]["outcome"] == "FAILED" and job["state"] == "PENDING"


def test_cancel_running_and_pending_jobs(daemon):
    daemon.fake.setup(n=1, memory="80G")
    daemon.start("--kill-after", "0.5", gpus=None)
    running = daemon.submit(*daemon.workload("--seconds", "60", "--record", daemon.record))
    pending = daemon.submit(*daemon.workload("--seconds", "60"))
    wait_until(lambda: records.read(daemon.record), message="running")
    out = daemon.berth("cancel", str(running), str(pending))
    assert out.returncode == 0, out.stderr
    rows = daemon.wait_done([running, pending])
    assert rows[running]["state"] == "CANCELLED" and rows[pending]["state"] == "CANCELLED"
    end = [e for e in records.read(daemon.record) if e["event"] == "end"]
    assert end and end[0]["signal"] == 15  # it got SIGTERM first


def test_signal_is_delivered_without_cancelling(daemon):
    daemon.start()
    job_id = daemon.submit(*daemon.workload("--seconds", "60", "--record", daemon.record))
    wait_until(lambda: records.read(daemon.record), message="started")
    assert daemon.berth("cancel", "-s", "INT", str(job_id)).returncode == 0
    row = daemon.wait_done([job_id])[job_id]
    assert row["state"] == "FAILED"  # it died of SIGINT by itself
    assert records.read(daemon.record)[-1]["signal"] == 2


def test_hold_and_release(daemon):
    daemon.start()
    job_id = daemon.submit(*daemon.workload("--seconds", "0.05"), hold=True)
    assert daemon.call("queue")["jobs"][0]["reason"] == "Held"
    assert daemon.berth("release-job", str(job_id)).returncode == 0
    assert daemon.wait_done([job_id])[job_id]["state"] == "COMPLETED"
    other = daemon.submit(*daemon.workload("--seconds", "60"), gpu_ids=[0])
    wait_until(lambda: daemon.job(other)["state"] == "RUNNING", message="running")
    out = daemon.berth("hold", str(other))
    assert out.returncode == 1 and "only a pending job" in out.stderr


def test_pause_drains_a_gpu_and_survives_restart(daemon):
    daemon.fake.setup(n=2, memory="80G")
    daemon.start(gpus=None)
    assert daemon.berth("pause", "1").returncode == 0
    daemon.stop()
    daemon.start(gpus=None)
    ids = [daemon.submit(*daemon.workload("--seconds", "0.2", "--record", daemon.record))
           for _ in range(3)]  # fmt: skip
    daemon.wait_done(ids)
    used = {g for _, _, gpus, _ in records.intervals(daemon.record) for g in gpus}
    assert used == {daemon.fake.uuids[0]}
    job_id = daemon.submit(*daemon.workload("--seconds", "0.1"), gpu_ids=[1])
    wait_until(
        lambda: (daemon.job(job_id)["reason"] or "").startswith("GpuPaused"), message="GpuPaused"
    )
    assert daemon.berth("resume", "1").returncode == 0
    assert daemon.wait_done([job_id])[job_id]["state"] == "COMPLETED"
