"""`berth demo`, the README's first command, on a machine without a driver."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys


def test_demo_without_driver_says_so_and_runs_on_logical_gpus() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BERTH_", "FAKE_NVML"))}
    env.pop("LD_LIBRARY_PATH", None)  # no libnvidia-ml.so.1 anywhere: a laptop, CI
    done = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "demo", "--gpus", "2"],
        env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "no NVIDIA driver here" in out
    assert "declared inventory of 2 logical GPUs" in out
    assert "(declared, no telemetry)" in out  # berth status on the logical GPUs
    # step 2: 6 one-GPU commands on 2 GPUs: each GPU ran 3, one after the other
    timeline = [line.split() for line in out.splitlines() if "->" in line and "#" in line]
    by_gpu: dict[str, list[tuple[float, float]]] = {}
    for row in timeline[:6]:
        by_gpu.setdefault(row[1], []).append((float(row[2]), float(row[4])))
    assert sorted(by_gpu) == ["0", "1"]
    for spans in by_gpu.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert "COMPLETED" in out or " CD " in out  # the queue part ran jobs to the end
