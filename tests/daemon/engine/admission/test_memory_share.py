"""mgpu_srun's memory as the resource (issue 27, point 1): `--mem` without `-g` asks for a
share of its GPU sized by memory, so two users' `--gpu-ids 0 --mem 8000` on an 80 GB GPU run
side by side (mgpu_srun ran both); `-g 1 --mem X` keeps meaning a whole GPU with X free."""

from __future__ import annotations

import os

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


def test_memory_jobs_on_two_gpus_share_both(daemon):
    """mgpu_srun's `--gpu-ids 0,1 --mem 8000`: 8000 MiB of each of GPUs 0 and 1 (mgpu_srun
    started a job once that much was free on each requested GPU). Two such jobs run side by
    side on both GPUs; `show` says what each holds; `-g 2 --mem 8000` is two whole GPUs."""
    daemon.start()  # (4 fake 80G GPUs)
    work = daemon.workload("--seconds", "60")
    a = _submit(daemon, "--gpu-ids", "0,1", "--mem", "8000", "--", *work)
    b = _submit(daemon, "--gpu-ids", "0,1", "--mem", "8000", "--", *work)
    wait_until(lambda: all(daemon.job(i)["state"] == "RUNNING" for i in (a, b)), timeout=15,
               message="both two-GPU memory jobs running on GPUs 0 and 1")  # fmt: skip
    for i in (a, b):
        job = daemon.job(i)
        assert job["attempts"][-1]["gpus"] == [0, 1]
        assert job["request"]["gpus"] == 2
        assert job["request"]["each"] == pytest.approx(8000 / (80 * 1024), abs=0.001)
        assert job["attempts"][-1]["share"] == job["request"]["each"]
    shown = daemon.berth("show", str(a)).stdout
    assert "0.098 of each of 2 GPUs" in shown and "8000 MiB of each of 2 GPUs" in shown
    listed = daemon.berth("queue").stdout  # GPUS: that share of each of 2 GPUs
    assert any(line.split()[0] == str(a) and " 2x0.098 " in line for line in listed.splitlines())
    whole = _submit(daemon, "--gpu-ids", "0,1", "-g", "2", "--mem", "8000", "--", "true")
    job = daemon.job(whole)
    assert job["request"]["gpus"] == 2 and "each" not in job["request"]
    assert job["state"] == "PENDING"  # two whole GPUs: it waits for the shares to end
    for i in (whole, a, b):  # (the waiting one first: once a and b end it would start, end, and
        daemon.call("cancel", job_ids=[i])  # refuse a cancel as already ended)


def test_mem_without_g_on_gpus_of_unknown_memory_is_refused_with_the_fix(daemon):
    """A declared inventory without `memory`: `--mem X` alone cannot be sized as a share, and
    silently took whole GPUs (issue 40.5); refused at submit (and its dry run), saying how to
    declare the memory or what to ask for instead; -g with --mem still queues."""
    config = os.path.join(daemon.fake.root, "config.toml")
    with open(config, "w") as f:
        f.write("[inventory]\ngpus = 2\n")
    daemon.env["BERTH_CONFIG"] = config
    daemon.start(gpus=None)
    for dry in ((), ("--dry-run",)):
        out = daemon.berth("submit", *dry, "--mem", "12G", "--", "true")
        assert out.returncode == 2, (dry, out.stdout, out.stderr)
        for needle in ("--mem 12G without -g", "GPU 0, 1", 'memory = "80G" under [inventory]',
                       "-g 0.5 --mem 12G", "-g 1 --mem 12G", "nothing was queued"):  # fmt: skip
            assert needle in out.stderr, (needle, out.stderr)
    assert daemon.call("queue", all=True)["jobs"] == []
    assert _submit(daemon, "-g", "0.5", "--mem", "12G", "--", "true") > 0
