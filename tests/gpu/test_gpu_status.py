"""`berth status` on a real GPU: a PyTorch process with its memory, as nvidia-smi sees it, and
as an unprivileged user sees root's (tests/gpu/conftest.py: run only where a driver answers)."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
from typing import Any

import pytest
from gpukit import ON_GPU0, real_gpu

GiB = 1 << 30
MiB = 1 << 20


def gpu0(status: dict[str, Any]) -> dict[str, Any]:
    g: dict[str, Any] = status["gpus"][0]
    assert g["index"] == 0
    return g


def test_status_lists_a_pytorch_process_with_its_memory(gpu: Any) -> None:
    with real_gpu.progs() as started:
        p = gpu.start_prog(mem_gib=4, wait="stdin", env=ON_GPU0)
        started.append(p)
        p.next_event("ready", timeout=120)
        status = gpu.status_json()
    g = gpu0(status)
    assert g["healthy"], g["error"]
    assert g["memory_used"] >= 4 * GiB
    assert g["memory_free"] <= g["memory_total"] - 4 * GiB
    mine = real_gpu.proc_entry(status, p.proc.pid)
    assert mine is not None, g["processes"]
    assert mine["used_memory"] >= 4 * GiB  # the tensor, and the CUDA context on top
    assert mine["user"] == pwd.getpwuid(os.getuid()).pw_name
    assert "prog.py" in mine["command"]


def test_readings_a_datacenter_gpu_has_are_there(gpu: Any) -> None:
    g = gpu0(gpu.status_json())
    for key in ("pci_bus_id", "memory_total", "utilization", "memory_utilization",
                "power_draw", "power_limit", "temperature", "performance_state"):  # fmt: skip
        assert g[key] is not None, (key, g)


def test_status_matches_nvidia_smi(gpu: Any) -> None:
    smi = gpu.smi()
    if smi is None:
        pytest.skip("nvidia-smi not available")
    with real_gpu.progs() as started:
        p = gpu.start_prog(mem_gib=4, wait="stdin", env=ON_GPU0)
        started.append(p)
        p.next_event("ready", timeout=120)
        status = gpu.status_json()
        rows = real_gpu.parse_smi_csv(subprocess.run(
            [smi, f"--query-gpu={real_gpu.SMI_GPU_FIELDS}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=60, check=True, env=gpu.env).stdout,
            real_gpu.SMI_GPU_FIELDS)  # fmt: skip
        apps = real_gpu.parse_smi_csv(subprocess.run(
            [smi, f"--query-compute-apps={real_gpu.SMI_APP_FIELDS}",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=60, check=True, env=gpu.env).stdout,
            real_gpu.SMI_APP_FIELDS)  # fmt: skip
    by_uuid = {g["uuid"]: g for g in status["gpus"]}
    assert set(by_uuid) == {r["uuid"] for r in rows}
    for row in rows:
        g = by_uuid[row["uuid"]]
        assert g["name"] == row["name"]
        assert g["pci_bus_id"].lower() == str(row["pci.bus_id"]).lower()
        assert abs(g["memory_total"] / MiB - row["memory.total"]) <= 1
        assert abs(g["memory_free"] / MiB - row["memory.free"]) <= 256  # read moments apart
    theirs = [a for a in apps if a["pid"] is not None and int(a["pid"]) == p.proc.pid]
    mine = real_gpu.proc_entry(status, p.proc.pid)
    assert theirs and mine, (apps, status["gpus"])
    assert abs(mine["used_memory"] / MiB - theirs[0]["used_memory"]) <= 1


def test_unprivileged_user_sees_roots_process_and_never_a_wrong_holder(gpu: Any) -> None:
    if os.getuid() != 0:
        pytest.skip("not root: cannot act as another user")
    user = real_gpu.unprivileged_user()
    with real_gpu.progs() as started:
        p = gpu.start_prog(mem_gib=2, wait="stdin", env=ON_GPU0)
        started.append(p)
        p.next_event("ready", timeout=120)
        r = real_gpu.run_as(gpu, user, ["status", "--json"])
        sel = real_gpu.run_as(gpu, user, ["select", "--only", "0", "--explain"])
    assert (sel.returncode, sel.stdout) == (1, ""), sel.stderr  # root's process is seen
    assert r.returncode == 0, r.stderr
    status = json.loads(r.stdout)
    assert all(g["healthy"] for g in status["gpus"]), status["gpus"]
    seen = real_gpu.proc_entry(status, p.proc.pid)
    if seen is not None:  # listed: what is said of it is right, or unknown (null)
        assert seen["user"] in (None, "root"), seen
        assert seen["command"] is None or "prog.py" in seen["command"], seen
