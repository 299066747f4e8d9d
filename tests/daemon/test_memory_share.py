"""mgpu_srun's memory as the resource (issue 27, point 1): `--mem` without `-g` asks for a
share of its GPU sized by memory, so two users' `--gpu-ids 0 --mem 8000` on an 80 GB GPU run
side by side (mgpu_srun ran both); `-g 1 --mem X` keeps meaning a whole GPU with X free."""

from __future__ import annotations

import pytest
from helpers import wait_until


def _submit(daemon, *args: str) -> int:  # type: ignore[no-untyped-def]
    out = daemon.berth("submit", "--parsable", *args)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


def test_two_memory_jobs_share_a_gpu(daemon):
    daemon.start()  # (4 fake 80G GPUs)
    work = daemon.workload("--seconds", "60")
    a = _submit(daemon, "--gpu-ids", "0", "--mem", "8000", "--", *work)
    b = _submit(daemon, "--gpu-ids", "0", "--mem", "8000", "--", *work)
    wait_until(lambda: all(daemon.job(i)["state"] == "RUNNING" for i in (a, b)), timeout=15,
               message="both memory jobs running on GPU 0")  # fmt: skip
    jobs = {i: daemon.job(i) for i in (a, b)}
    assert all(j["attempts"][-1]["gpus"] == [0] for j in jobs.values())
    share = jobs[a]["request"]["gpus"]
    assert share == pytest.approx(8000 / (80 * 1024), abs=0.001) and share < 0.1
    shown = daemon.berth("show", str(a)).stdout
    assert "of a GPU, 7.8G each" in shown and "sized by --mem" in shown
    whole = _submit(daemon, "--gpu-ids", "0", "-g", "1", "--mem", "8000", "--", "true")
    assert daemon.job(whole)["request"]["gpus"] == 1  # a whole GPU: it waits for GPU 0
    for i in (a, b):
        daemon.call("cancel", job_ids=[i])


def test_a_share_no_gpu_can_hold_is_refused(daemon):
    daemon.start()
    out = daemon.berth("submit", "--mem", "100G", "--", "true")
    assert out.returncode != 0 and "100" in out.stderr
