"""The test Slurm itself: it has GPUs and shards, and leaves nothing behind. (That jobs get
their GPUs as CUDA_VISIBLE_DEVICES is checked by test_sweep.py and the conformance suite.)"""

from __future__ import annotations

from helpers import wait_until
from slurmrig import SlurmRig


def test_shards_are_defined(slurm: SlurmRig) -> None:
    gres = slurm.run("sinfo", "-h", "-o", "%G").stdout.strip()
    assert "shard:8" in gres and "gpu:4" in gres


def test_clear_leaves_no_step_daemon(slurm: SlurmRig) -> None:
    slurm.run("sbatch", "--parsable", "--gres=gpu:1", "-o", "/dev/null", "--wrap", "sleep 60")
    wait_until(slurm.steps_alive, timeout=20, message="the job's step daemon")
    slurm.clear()
    assert slurm.job_ids() == [] and slurm.steps_alive() == []
