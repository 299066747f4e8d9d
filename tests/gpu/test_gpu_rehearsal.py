"""bench/real_gpu.py itself, without a GPU: rehearsed against the fake library, and what it
says on a machine without a driver. They run where no driver answers (marker ``rehearsal``:
not skipped with the others), so the one real run the script gets does not trip on a typo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpukit import ROOT, clean_env, driver_missing

SCRIPT = str(ROOT / "bench" / "real_gpu.py")
STEPS = "versions,status,select,acquire,ended,caching"


def run(out: Path, *args: str, env: dict[str, str], steps: str = STEPS) -> dict:
    r = subprocess.run(
        [sys.executable, SCRIPT, "--out", str(out), "--steps", steps, *args],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    results = json.loads((out / "results.json").read_text())
    results["rc"] = r.returncode
    results["stdout"] = r.stdout + r.stderr
    return results


# The check that found a berth bug (issue 26): after CUDA init the caller's own context
# counted as an outside process, so acquire() waited for itself. It passes now.
FIXED_BUG = "acquire after CUDA init (default filters) gets the GPU"


@pytest.mark.rehearsal
def test_the_fake_rehearsal_says_what_it_could_not_check(tmp_path: Path) -> None:
    if driver_missing() is None:  # (and the machine may have no C compiler for the fake)
        pytest.skip("a real NVIDIA driver answers here: the real run replaces the rehearsal")
    env = {k: v for k, v in clean_env().items() if k not in ("BERTH_FAKE_TORCH", "BERTH_FAKE_SMI")}
    res = run(tmp_path, "--fake", env=env)
    assert res["rc"] == 0, res["stdout"]
    steps = res["steps"]
    assert list(steps) == STEPS.split(",")
    assert {n: s["status"] for n, s in steps.items()} == dict.fromkeys(steps, "ok")
    # what needs torch or nvidia-smi says so, never passes silently
    na = {c["name"]: c["detail"] for s in steps.values() for c in s["checks"] if c["ok"] is None}
    assert na["berth status --json against nvidia-smi"] == "nvidia-smi not available"
    assert "not available" in na["NVML while PyTorch's caching allocator holds freed memory"]
    assert "not available" in na["acquire after CUDA init"]
    summary = (tmp_path / "summary.md").read_text()
    assert "mode: **fake**" in summary and "## select: ok" in summary


@pytest.mark.rehearsal
def test_the_rehearsal_with_stand_ins_for_torch_and_nvidia_smi(tmp_path: Path) -> None:
    """tests/gpu/faketorch and the stand-in nvidia-smi: the torch branch of the GPU program,
    the caching and nvidia-smi comparisons run too."""
    if driver_missing() is None:
        pytest.skip("a real NVIDIA driver answers here: the real run replaces the rehearsal")
    env = {**clean_env(), "BERTH_FAKE_SMI": "1", "BERTH_FAKE_TORCH": "1"}
    res = run(tmp_path, "--fake", env=env, steps="status,acquire,caching")
    checks = [c for s in res["steps"].values() for c in s["checks"]]
    failed = [c["name"] for c in checks if c["ok"] is False]
    assert failed == [], [c for c in checks if c["ok"] is False]
    assert all(s["status"] in ("ok", "fail") for s in res["steps"].values()), res["stdout"]
    ok = {c["name"] for c in checks if c["ok"] is True}
    assert FIXED_BUG in ok
    assert "root: holder's used_memory equal to nvidia-smi's (MiB)" in ok
    assert "after empty_cache() NVML shows only the context (< 1 GiB)" in ok
    assert (
        "acquire after CUDA init (max_procs=1): lease.devices names the claimed GPU as this "
        "process sees it, with a warning" in ok
    )
    if os.getuid() == 0:
        assert "as berthgpu: root's holder listed (NVML shows other users' processes)" in ok


@pytest.mark.rehearsal
def test_without_a_driver_every_step_says_so_and_the_run_ends(tmp_path: Path) -> None:
    if driver_missing() is None:
        pytest.skip("a real NVIDIA driver answers here")
    env = {**clean_env(), "PATH": os.environ.get("PATH", "")}
    res = run(tmp_path, "--budget", "120", env=env)
    assert res["rc"] == 1
    versions = res["steps"]["versions"]
    assert versions["status"] == "error"
    assert "NVIDIA driver" in versions["data"]["error"], versions["data"]["error"]
    assert set(res["steps"]) == set(STEPS.split(","))  # every step ran and reported
    assert (tmp_path / "summary.md").exists()
