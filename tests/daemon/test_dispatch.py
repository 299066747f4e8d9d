"""Acceptance: jobs on 4 fake GPUs through a real daemon (issue 4)."""

from __future__ import annotations

import records
from helpers import wait_until

GIB = 1024**3


def test_40_whole_gpu_jobs_all_complete_at_most_4_at_once_never_shared(daemon):
    daemon.start()
    work = daemon.workload("--seconds", "0.2", "--record", daemon.record)
    ids = [daemon.submit(*work, gpus=1) for _ in range(40)]
    rows = daemon.wait_done(ids, timeout=60)
    assert {r["state"] for r in rows.values()} == {"COMPLETED"}
    runs = records.intervals(daemon.record)
    assert sorted(int(j) for *_, j in runs) == ids  # each job ran exactly once
    assert records.max_concurrency(daemon.record) <= 4
    assert max(records.max_per_gpu(daemon.record).values()) == 1
    # The job saw exactly the GPU it was given (CUDA_VISIBLE_DEVICES in PCI order).
    for i in ids[:4]:
        job = daemon.job(i)
        assert len(job["attempts"]) == 1 and len(job["attempts"][0]["gpus"]) == 1


def test_half_gpu_jobs_with_30g_pair_up_on_80g_gpus(daemon):
    daemon.start()
    work = daemon.workload("--seconds", "1", "--mem", "1G", "--record", daemon.record)
    ids = [daemon.submit(*work, gpus=0.5, mem=30 * GIB) for _ in range(8)]
    rows = daemon.wait_done(ids, timeout=30)
    assert {r["state"] for r in rows.values()} == {"COMPLETED"}
    per_gpu = records.max_per_gpu(daemon.record)
    assert max(per_gpu.values()) == 2  # two halves shared a GPU
    assert records.max_concurrency(daemon.record) == 8  # all 8 ran together on 4 GPUs


def test_three_30g_shares_never_share_one_80g_gpu_memory(daemon):
    daemon.fake.setup(n=1, memory="80G")
    daemon.start(gpus=None)
    work = daemon.workload("--seconds", "0.5", "--record", daemon.record)
    ids = [daemon.submit(*work, gpus=0.3, mem=30 * GIB) for _ in range(3)]
    daemon.wait_done(ids, timeout=30)
    assert records.max_per_gpu(daemon.record) == {daemon.fake.uuids[0]: 2}


def test_gpu_ids_job_waits_for_its_gpu(daemon):
    daemon.start()
    blocker = daemon.submit(*daemon.workload("--seconds", "30"), gpu_ids=[2])
    wait_until(lambda: daemon.job(blocker)["state"] == "RUNNING", message="blocker runs")
    waiter = daemon.submit(*daemon.workload("--seconds", "0.1"), gpu_ids=[2])
    free = daemon.submit(*daemon.workload("--seconds", "0.1"))
    daemon.wait_done([free])
    job = daemon.job(waiter)
    assert job["state"] == "PENDING" and job["reason"].startswith("Resources")
    daemon.call("cancel", job_ids=[blocker])
    rows = daemon.wait_done([blocker, waiter])
    assert rows[blocker]["state"] == "CANCELLED"
    assert rows[waiter]["state"] == "COMPLETED" and rows[waiter]["nodelist"] == [2]


def test_priorities_reorder_the_queue(daemon):
    daemon.fake.setup(n=1, memory="80G")
    daemon.start(gpus=None)
    blocker = daemon.submit(*daemon.workload("--seconds", "30"))
    wait_until(lambda: daemon.job(blocker)["state"] == "RUNNING", message="blocker runs")
    work = daemon.workload("--seconds", "0.05", "--record", daemon.record)
    low = daemon.submit(*work, priority=0)
    mid = daemon.submit(*work, priority=5)
    high = daemon.submit(*work, priority=10)
    queue = [r["id"] for r in daemon.call("queue")["jobs"]]
    assert queue == [blocker, high, mid, low]
    daemon.call("cancel", job_ids=[blocker])
    daemon.wait_done([low, mid, high])
    order = [int(j) for _, _, _, j in sorted(records.intervals(daemon.record))]
    assert order == [high, mid, low]


def test_afterok_waits_then_runs_and_is_cancelled_when_its_dependency_fails(daemon):
    daemon.start()
    ok = daemon.submit(*daemon.workload("--seconds", "0.5", "--record", daemon.record))
    bad = daemon.submit(*daemon.workload("--seconds", "0.3", "--exit-code", "3"))
    after_ok = daemon.submit(*daemon.workload("--seconds", "0.05", "--record", daemon.record),
                             after_ok=[ok])  # fmt: skip
    after_bad = daemon.submit(*daemon.workload("--seconds", "0.05"), after_ok=[bad])
    job = daemon.job(after_ok)
    assert job["state"] == "PENDING" and job["reason"].startswith("Dependency")
    rows = daemon.wait_done([ok, bad, after_ok, after_bad])
    assert rows[ok]["state"] == "COMPLETED"
    assert rows[bad]["state"] == "FAILED" and rows[bad]["exit_code"] == 3
    assert rows[after_ok]["state"] == "COMPLETED"
    runs = {int(j): (s, e) for s, e, _, j in records.intervals(daemon.record)}
    assert runs[after_ok][0] >= runs[ok][1]  # started only after its dependency ended
    failed_dep = daemon.job(after_bad)
    assert failed_dep["state"] == "CANCELLED" and failed_dep["attempts"] == []
    assert f"afterok:{bad}" in failed_dep["history"][-1]["detail"]
    shown = daemon.berth("show", str(after_bad))
    assert f"afterok:{bad}" in shown.stdout


def test_job_environment_and_logs(daemon):
    daemon.start()
    job_id = daemon.submit(
        wrap='echo "cvd=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER id=$BERTH_JOB_ID '
        'uuids=$BERTH_GPU_UUIDS"; echo oops >&2',
        gpu_ids=[3],
    )
    daemon.wait_done([job_id])
    out = daemon.berth("logs", str(job_id))
    assert out.returncode == 0
    assert out.stdout == (  # one log for output and errors, as sbatch's default
        f"cvd=3 order=PCI_BUS_ID id={job_id} uuids={daemon.fake.uuids[3]}\noops\n"
    )
    merged = daemon.berth("logs", "--err", str(job_id))
    assert merged.stdout == out.stdout and "-e FILE" in merged.stderr
    err_file = str(daemon.fake.root / "%j.err")
    apart = daemon.submit(wrap="echo fine; echo oops >&2", stderr=err_file)
    daemon.wait_done([apart])
    assert daemon.berth("logs", str(apart)).stdout == "fine\n"
    assert daemon.berth("logs", "--err", str(apart)).stdout == "oops\n"
    assert (daemon.fake.root / f"{apart}.err").read_text() == "oops\n"
    held = daemon.submit("echo", "later", hold=True)
    waiting = daemon.berth("logs", str(held))
    assert waiting.returncode == 0 and waiting.stdout == ""
    assert f"job {held} has not started (Held" in waiting.stderr
