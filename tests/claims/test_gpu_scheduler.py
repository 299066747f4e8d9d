"""GPU Scheduler's README examples, run with only the import changed (torch is a stand-in that
records set_device), and GPUScheduler's parameters on berth's claims."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from berth.api.lease import build_request, claim
from berth.claims.ledger import Ledger
from berth.compat.gpu_scheduler import GPUScheduler
from berth.errors import WaitTimeout

FAKE_TORCH = str(Path(__file__).with_name("fake_torch"))

PRELUDE = """
import torch
from berth.claims.ledger import Ledger
class Model:
    def to(self, device):
        self.device = device
        return self
model = Model()
def held():  # the GPUs berth's ledger says this process holds
    return sorted(c.index for c in Ledger().scan().claims)
"""

# The README's examples, verbatim but for the import line (and checks after each).
EXAMPLES = {
    "quick start": """
from berth.compat.gpu_scheduler import GPUScheduler

# Acquire a single GPU with default settings
with GPUScheduler() as gpu_ids:
    # Option 1: Explicitly use the scheduled GPU (recommended)
    device = f"cuda:{gpu_ids[0]}"
    model = model.to(device)

    # Option 2: Use default device (scheduler sets it automatically)
    device = torch.device("cuda")  # Uses the scheduled GPU
    model = model.to(device)
    assert held() == gpu_ids and device.index == gpu_ids[0], (held(), gpu_ids, device)
    assert torch.cuda.current_device() == gpu_ids[0]
""",
    "basic usage": """
from berth.compat.gpu_scheduler import GPUScheduler

# Single GPU with memory constraint
with GPUScheduler(memory_free_threshold_gb=20) as gpu_ids:
    # Explicitly use the scheduled GPU (recommended)
    device = f"cuda:{gpu_ids[0]}"
    print(f"Using GPU: {gpu_ids[0]} on device: {device}")

    # Or use default device (scheduler already set it)
    device = torch.device("cuda")

    # Your code here
    model = model.to(device)
    assert held() == gpu_ids and model.device.index == gpu_ids[0]
""",
    "multiple GPUs": """
from berth.compat.gpu_scheduler import GPUScheduler

# Acquire multiple GPUs
with GPUScheduler(
    num_gpus=2,
    memory_free_threshold_gb=10,
    power_threshold_w=50,
    utilization_threshold_percent=1
) as gpu_ids:
    print(f"Using GPUs: {gpu_ids}")

    # Use the first scheduled GPU as default
    device = f"cuda:{gpu_ids[0]}"

    # Or access specific GPUs
    device1 = f"cuda:{gpu_ids[0]}"
    device2 = f"cuda:{gpu_ids[1]}"

    # Your code here
    assert held() == sorted(gpu_ids) and len(gpu_ids) == 2
""",
    "debug mode": """
from berth.compat.gpu_scheduler import GPUScheduler

# Bypass all health checks (useful for development)
with GPUScheduler(debug_mode=True) as gpu_ids:
    print(f"Using GPU: {gpu_ids[0]}")
    # Your code here
    assert held() == gpu_ids
""",
    "gpu information": """
from berth.compat.gpu_scheduler import get_gpu_info, find_free_gpus

# Get comprehensive GPU information
gpu_info = get_gpu_info()
for gpu in gpu_info:
    print(f"GPU {gpu['gpu_id']}: {gpu['name']}")
    print(f"  Memory: {gpu['memory_free']}MB free / {gpu['memory_total']}MB total")
    print(f"  Power: {gpu['power_draw']}W / {gpu['power_limit']}W")
    print(f"  Utilization: {gpu['utilization']}%")

# Find free GPUs
free_gpus = find_free_gpus(
    memory_free_threshold_gb=20,
    power_threshold_w=50,
    utilization_threshold_percent=1
)
print(f"Found {len(free_gpus)} free GPUs")
""",
}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_seed_000_readme_example(fake_gpus: Any, name: str) -> None:
    fake_gpus.setup(n=4, power_mw=40000)  # 40 W: under the examples' 50 W threshold
    fake_gpus.update(0, util=30)  # GPU 0 busy: the health checks must step around it
    env = {**fake_gpus.env, "PYTHONPATH": FAKE_TORCH}
    r = subprocess.run(
        [sys.executable, "-c", PRELUDE + EXAMPLES[name]],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    if name == "gpu information":
        assert "GPU 3: NVIDIA A100-SXM4-80GB" in r.stdout and "Found 3 free GPUs" in r.stdout
    elif name != "debug mode":
        assert "Using GPU: 0" not in r.stdout and "cuda:0" not in r.stdout


def test_physical_ids_and_pci_order(fake_gpus: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    fake_gpus.setup(n=4)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    with GPUScheduler(specific_gpus=[3]) as ids:
        assert ids == [3]
        assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        assert "CUDA_VISIBLE_DEVICES" not in os.environ  # all GPUs stay visible, as in GPU Scheduler
        with pytest.raises(WaitTimeout, match="GPU 3: held by berth claims"):
            with GPUScheduler(specific_gpus=[3], max_wait_time=0.2, poll_interval=0.05):
                pass
    assert "CUDA_DEVICE_ORDER" not in os.environ


def test_max_wait_time_and_debug_mode_bypassing_health_not_claims(fake_gpus: Any) -> None:
    fake_gpus.setup(n=2)
    for i in range(2):
        fake_gpus.update(i, util=90)
    t0 = time.monotonic()
    with pytest.raises(WaitTimeout, match="utilisation 90% > 1%"):
        with GPUScheduler(max_wait_time=0.3, poll_interval=0.1):
            pass
    assert time.monotonic() - t0 < 3
    with GPUScheduler(debug_mode=True, num_gpus=2) as ids:
        assert sorted(ids) == [0, 1]
        with pytest.raises(WaitTimeout, match="held by berth claims"):
            with GPUScheduler(debug_mode=True, max_wait_time=0.2):
                pass
    assert Ledger().scan().claims == []


def test_waiting_scheduler_gets_a_released_gpu(fake_gpus: Any) -> None:
    fake_gpus.setup(n=1)
    lease, _ = claim(build_request(1), timeout=0)
    code = "from berth.compat.gpu_scheduler import GPUScheduler\nwith GPUScheduler(poll_interval=60) as ids: print(ids)"
    p = subprocess.Popen(
        [sys.executable, "-c", code], env=fake_gpus.env, stdout=subprocess.PIPE, text=True
    )
    from helpers import wait_until

    wait_until(lambda: Ledger().scan().waiters, timeout=15, message="the scheduler to wait")
    lease.release()
    out, _ = p.communicate(timeout=10)  # woken by the release, not by the 60 s poll
    assert out == "[0]\n"
