"""A request no GPU of this machine could ever satisfy is refused at once, with the reason,
by `berth run`, `berth.acquire` and GPUScheduler alike (issue 27, point 8): it waited for
ever. What only changes with time (use, processes, claims) still waits."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

import berth
from berth.claims.ledger import Ledger
from berth.compat.gpu_scheduler import GPUScheduler
from berth.errors import EXIT_UNSATISFIED, NotEnoughGpus, WaitTimeout


def _run(fake_gpus: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "run", *args, "--", "true"],
        env=fake_gpus.env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "reason"),
    [(("-g", "9"), "only 8 of 9 GPUs qualify (there are 8 GPUs)"),
     (("--mem", "100G"), "GPU 0: total 80.0G < --mem 100G"),
     (("--name", "H100"), "GPU 0: name 'NVIDIA A100-SXM4-80GB' does not contain 'H100'"),
     (("--min-free", "90G"), "GPU 3: free 80.0G < 90.0G")],
)  # fmt: skip
def test_run_refuses_at_once(fake_gpus: Any, args: tuple[str, ...], reason: str) -> None:
    fake_gpus.setup(n=8)
    out = _run(fake_gpus, *args)
    assert out.returncode == EXIT_UNSATISFIED
    assert "this machine can never give" in out.stderr and reason in out.stderr


def test_acquire_and_gpuscheduler_refuse_at_once(fake_gpus: Any) -> None:
    fake_gpus.setup(n=8)
    with pytest.raises(NotEnoughGpus, match=r"never give 9 GPUs.*there are 8 GPUs"):
        berth.acquire(9)
    with pytest.raises(NotEnoughGpus, match="never give 9 GPUs"):
        GPUScheduler(num_gpus=9).__enter__()
    with pytest.raises(NotEnoughGpus, match="name 'NVIDIA A100-SXM4-80GB' does not contain"):
        berth.acquire(1, name="H100")
    assert Ledger().scan().claims == []  # nothing was claimed, nobody waits


def test_visible_devices_bound_what_can_ever_fit(fake_gpus: Any) -> None:
    fake_gpus.setup(n=8)
    env = {**fake_gpus.env, "CUDA_VISIBLE_DEVICES": "0,1"}
    out = subprocess.run([sys.executable, "-m", "berth.cli.main", "run", "-g", "3", "--",
                          "true"], env=env, capture_output=True, text=True, timeout=30)  # fmt: skip
    assert out.returncode == EXIT_UNSATISFIED and "there are 2 GPUs" in out.stderr


def test_what_changes_with_time_still_waits(fake_gpus: Any) -> None:
    """A busy GPU, or one another holder claims, may free: that is worth waiting for."""
    fake_gpus.setup(n=1)
    busy = fake_gpus.spawn_workload(visible="0", mem="2G", util=50)
    with pytest.raises(WaitTimeout):  # (not NotEnoughGpus: it waited)
        berth.acquire(1, timeout=0.3)
    busy.kill()
    busy.wait()
    with berth.acquire(1) as lease, pytest.raises(WaitTimeout):
        berth.acquire(1, timeout=0.3)
    assert not lease.active


def test_a_program_that_started_cuda_is_not_outside_use_of_its_gpu(fake_gpus: Any) -> None:
    """A program that initialised CUDA before asking (torch imported and used) has a context
    on a GPU, which NVML lists: berth.acquire() must not wait for the program itself (found
    when rehearsing the real-GPU run, issue 26)."""
    fake_gpus.setup(n=1)
    os.makedirs(fake_gpus.procs_dir, exist_ok=True)
    me = os.path.join(fake_gpus.procs_dir, str(os.getpid()))
    with open(me, "w") as f:  # this process, on GPU 0, as the fake library reads it
        f.write(f"{fake_gpus.read()['gpus'][0]['uuid']} {512 << 20} 0 0 compute\n")
    try:
        with berth.acquire(1, timeout=2) as lease:
            assert lease.ids == [0]
        assert [g.index for g in berth.select(1)] == [0]
        other = fake_gpus.spawn_workload(visible="0", mem="1G")
        with pytest.raises(WaitTimeout):  # (another process still is outside use)
            berth.acquire(1, timeout=0.3)
        other.kill()
        other.wait()
    finally:
        os.unlink(me)
