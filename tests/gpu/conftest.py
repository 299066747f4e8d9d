"""berth against a real NVIDIA driver (issue 26): these tests run only where one answers.

On a machine without one every test here is skipped at collection with the reason ("no NVIDIA
driver: ...") in pytest's summary (``-ra``): never silently passed. ``bash bench/real_gpu.sh``
runs them on a GPU machine after bench/real_gpu.py.

``BERTH_GPU_REHEARSAL=fake`` runs them against tests/fakenvml instead (one H100-like fake
GPU; the fake workload stands in for the PyTorch program; what needs torch or nvidia-smi is
skipped as not available): a rehearsal, so the real run does not trip on a typo.

Everything that touches the driver runs in a child process with a clean environment: the
session fixture of tests/conftest.py preloads the fake library into pytest's own process when
other areas run in the same session, and it is overridden here (no C compiler needed on the
GPU machine). The rig is bench/real_gpu.py's (loaded by path): ``gpu`` gives a fresh
:class:`Rig` (a work directory under /tmp, a claims directory of its own, the GPU program)
whose ``start_prog`` starts a PyTorch program (real) or its stand-in (rehearsal).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
REHEARSAL = os.environ.get("BERTH_GPU_REHEARSAL") == "fake"
_why: list[str | None] = []  # computed once, when a test of this directory is collected


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [it for it in items if HERE in Path(str(it.path)).parents]
    if not mine:
        return
    if not _why:
        _why.append(no_driver())
    if _why[0] is None:
        return
    skip = pytest.mark.skip(reason=_why[0])
    for item in mine:
        if item.get_closest_marker("rehearsal") is None:
            item.add_marker(skip)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "rehearsal: runs bench/real_gpu.py --fake; needs no driver, never skipped"
    )


@pytest.fixture(scope="session", autouse=True)
def fakenvml_lib_dir() -> str:
    """Overrides tests/conftest.py's: nothing is built or preloaded for these tests."""
    return ""


@pytest.fixture
def gpu() -> Iterator[Any]:
    """A fresh rig (bench/real_gpu.py's ``Rig``); what it started is killed at teardown."""
    rig = real_gpu.new_rig(REHEARSAL)  # its environment leaves the fake out unless rehearsing
    try:
        yield rig
    finally:
        real_gpu.kill_marked(rig.mark)
        shutil.rmtree(rig.work, ignore_errors=True)


def need_torch(rig: Any) -> None:
    """Skip where the check is about torch itself and the rehearsal has none."""
    why = rig.torch()
    if why and REHEARSAL:
        pytest.skip(why)
    assert why is None, why
