"""The test Slurm itself: GPUs reach jobs as CUDA_VISIBLE_DEVICES, shards exist, and it
leaves nothing behind."""

from __future__ import annotations

import os

from helpers import wait_until
from slurmrig import SlurmRig


def test_jobs_get_their_gpus(slurm: SlurmRig, tmp_path: object) -> None:
    out = os.path.join(slurm.root, "rig-%j.out")
    ids = [
        slurm.run(
            "sbatch", "--parsable", "--gres=gpu:1", "-o", out,
            "--wrap", "echo $CUDA_VISIBLE_DEVICES; sleep 2",
        ).stdout.strip()
        for _ in range(4)
    ]  # fmt: skip
    paths = [out.replace("%j", i) for i in ids]

    def seen() -> list[str] | None:
        got = []
        for p in paths:
            try:
                with open(p) as f:
                    got.append(f.read().strip())
            except FileNotFoundError:
                return None
        return got if all(got) else None

    # All four run at once (the node is not limited to its 2 CPUs), each on its own GPU.
    assert sorted(wait_until(seen, timeout=20, message="4 jobs write their GPU")) == [
        "0", "1", "2", "3",
    ]  # fmt: skip


def test_shards_are_defined(slurm: SlurmRig) -> None:
    gres = slurm.run("sinfo", "-h", "-o", "%G").stdout.strip()
    assert "shard:8" in gres and "gpu:4" in gres


def test_clear_leaves_no_step_daemon(slurm: SlurmRig) -> None:
    slurm.run("sbatch", "--parsable", "--gres=gpu:1", "-o", "/dev/null", "--wrap", "sleep 60")
    wait_until(slurm.steps_alive, timeout=20, message="the job's step daemon")
    slurm.clear()
    assert slurm.job_ids() == [] and slurm.steps_alive() == []
