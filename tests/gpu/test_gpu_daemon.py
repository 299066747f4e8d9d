"""The daemon on a real GPU: a PyTorch job gets its GPU share, shows in NVML, completes."""

from __future__ import annotations

import os
from typing import Any

from gpukit import real_gpu
from helpers import wait_until

GiB = 1 << 30


def test_a_pytorch_job_runs_on_its_share_and_shows_in_nvml(gpu: Any) -> None:
    d = real_gpu.Daemon(gpu)
    try:
        release = os.path.join(gpu.work, "release")
        record = os.path.join(gpu.work, "job.jsonl")
        job = d.submit("-g", "0.5", "--mem", "12G", "-D", gpu.work, "--",
                       *gpu.prog_argv(mem_gib=4, wait="hold_file", hold_file=release,
                                      seconds=90, record=record))  # fmt: skip
        d.wait([job], {"RUNNING"}, 60)
        ready = wait_until(lambda: real_gpu.read_events(record, "ready"), timeout=120)[0]
        status = gpu.status_json()
        with open(release, "w"):
            pass
        rows = d.wait([job], real_gpu.DONE, 60)
    finally:
        d.stop()
    assert rows[job]["state"] == "COMPLETED", d.tail()
    assert ready["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert ready["env"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert ready["device_count"] == 1
    seen = real_gpu.proc_entry(status, ready["pid"])
    assert seen is not None and seen["used_memory"] >= 4 * GiB, status["gpus"]
