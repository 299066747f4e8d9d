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


def run(out: Path, *args: str, env: dict[str, str]) -> dict:
    r = subprocess.run(
        [sys.executable, SCRIPT, "--out", str(out), "--steps", STEPS, *args],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    results = json.loads((out / "results.json").read_text())
    results["rc"] = r.returncode
    results["stdout"] = r.stdout + r.stderr
    return results


@pytest.mark.rehearsal
def test_the_fake_rehearsal_passes_every_check_it_can_make(tmp_path: Path) -> None:
    if driver_missing() is None:  # (and the machine may have no C compiler for the fake)
        pytest.skip("a real NVIDIA driver answers here: the real run replaces the rehearsal")
    res = run(tmp_path, "--fake", env={**clean_env(), "BERTH_FAKE_SMI": "1"})
    assert res["rc"] == 0, res["stdout"]
    steps = res["steps"]
    assert list(steps) == STEPS.split(",")
    assert {n: s["status"] for n, s in steps.items()} == dict.fromkeys(steps, "ok")
    checks = {c["name"]: c["ok"] for s in steps.values() for c in s["checks"]}
    assert checks["root: holder's used_memory equal to nvidia-smi's (MiB)"] is True
    assert checks["as berthgpu: root's holder listed (NVML shows other users' processes)"] or (
        os.getuid() != 0
    )
    # what needs torch says so, never passes silently
    caching = steps["caching"]["checks"]
    assert [c["ok"] for c in caching] == [None]
    assert "not available" in caching[0]["detail"]
    summary = (tmp_path / "summary.md").read_text()
    assert "mode: **fake**" in summary and "## select: ok" in summary


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
