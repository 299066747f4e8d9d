"""What tests/gpu share (tests/gpu/conftest.py says how these tests run): bench/real_gpu.py
loaded by path as ``real_gpu`` (its ``Rig``, ``Prog``, ``Daemon``...), whether a real driver
answers, and the environment without the fake library."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
REHEARSAL = os.environ.get("BERTH_GPU_REHEARSAL") == "fake"


def _load_real_gpu() -> Any:
    spec = importlib.util.spec_from_file_location("real_gpu", ROOT / "bench" / "real_gpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["real_gpu"] = module
    spec.loader.exec_module(module)
    return module


real_gpu = _load_real_gpu()


def clean_env() -> dict[str, str]:
    """os.environ without the fake library (its LD_LIBRARY_PATH entry, FAKE_NVML_*)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_NVML")}
    ld = [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p and "fakenvml" not in p]
    if ld:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(ld)
    else:
        env.pop("LD_LIBRARY_PATH", None)
    return env


def no_driver() -> str | None:
    """Why these tests cannot run here (None: a real driver answers, or a rehearsal)."""
    return None if REHEARSAL else driver_missing()


def driver_missing() -> str | None:
    """Why no real NVIDIA driver answers here (None: one does)."""
    if not any(os.path.exists(p) for p in ("/dev/nvidiactl", "/proc/driver/nvidia/version")):
        return "no NVIDIA driver: neither /dev/nvidiactl nor /proc/driver/nvidia/version exists"
    probe = "import pynvml; pynvml.nvmlInit(); print(pynvml.nvmlDeviceGetCount())"
    try:
        r = subprocess.run(
            [sys.executable, "-c", probe], env=clean_env(), capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return "no NVIDIA driver: NVML did not answer in 60 s"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return f"no NVIDIA driver: NVML does not answer ({last})"
    if r.stdout.strip() in ("", "0"):
        return "no NVIDIA GPU: NVML counts 0 GPUs"
    return None


def need_torch(rig: Any) -> None:
    """Skip where the check is about torch itself and the rehearsal has none."""
    why = rig.torch()
    if why and REHEARSAL:
        pytest.skip(why)
    assert why is None, why


ON_GPU0 = {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
