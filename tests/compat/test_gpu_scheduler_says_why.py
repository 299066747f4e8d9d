"""GPU Scheduler's README example with `power_threshold_w=50` on GPUs idling at 61 W waited
for ever without a word (issue 40.5): it says once, on stderr, why it waits, each GPU's reason
as `berth select --explain` words it, the thresholds by their parameter names."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

SCRIPT = """
from berth.compat.gpu_scheduler import GPUScheduler
from berth.errors import WaitTimeout
try:
    with GPUScheduler(num_gpus=2, memory_free_threshold_gb=10, power_threshold_w=50,
                      max_wait_time=1.5, poll_interval=0.1) as gpu_ids:
        print("got", gpu_ids)
except WaitTimeout:
    print("timed out")
"""


def test_a_waiting_gpu_scheduler_says_once_why(fake_gpus: Any) -> None:
    fake_gpus.setup(n=2, power_mw=61000)  # idle, at 61 W
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=fake_gpus.env, capture_output=True,
                       text=True, timeout=60, check=False)  # fmt: skip
    assert r.stdout == "timed out\n", (r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if "waiting" in line]
    assert len(lines) == 1, r.stderr  # once, though it looked ~15 times
    (line,) = lines
    for needle in ("GPUScheduler", "power_threshold_w=50", "GPU 0: power 61W > 50W",
                   "GPU 1: power 61W > 50W"):  # fmt: skip
        assert needle in line, (needle, line)
