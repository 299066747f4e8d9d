"""The fake NVML library and workload, exercised through pynvml itself (the rig's own tests)."""

from __future__ import annotations

import os
import signal
import subprocess

import pynvml
import pytest
from helpers import wait_until


@pytest.fixture
def nvml(fake_gpus):
    fake_gpus.setup(4)
    pynvml.nvmlInit()
    yield fake_gpus
    pynvml.nvmlShutdown()


def _pids(index: int) -> list[int]:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    return [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]


def test_readings_follow_the_state_file(nvml) -> None:
    assert pynvml.nvmlDeviceGetCount() == 4
    h = pynvml.nvmlDeviceGetHandleByIndex(2)
    assert pynvml.nvmlDeviceGetUUID(h) == nvml.uuids[2]
    assert pynvml.nvmlDeviceGetPciInfo(h).busId == "00000000:47:00.0"
    assert pynvml.nvmlDeviceGetMemoryInfo(h).total == 80 << 30
    nvml.update(2, util=42, memory_used="1G", temp=70)
    assert pynvml.nvmlDeviceGetUtilizationRates(h).gpu == 42
    assert pynvml.nvmlDeviceGetMemoryInfo(h).free == 79 << 30
    assert pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU) == 70
    assert pynvml.nvmlDeviceGetIndex(pynvml.nvmlDeviceGetHandleByUUID(nvml.uuids[3].encode())) == 3


def test_injected_errors(nvml) -> None:
    h = pynvml.nvmlDeviceGetHandleByIndex(1)
    nvml.update(1, power_mw=None)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetPowerUsage(h)
    nvml.inject(1, "*", "GPU_IS_LOST")
    nvml.inject(1, "nvmlDeviceGetName", "UNKNOWN")
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetHandleByIndex(1)
    with pytest.raises(pynvml.NVMLError_Unknown):
        pynvml.nvmlDeviceGetName(h)
    nvml.inject(1, "*", None)
    nvml.inject(1, "nvmlDeviceGetName", None)
    assert pynvml.nvmlDeviceGetName(h) == "NVIDIA A100-SXM4-80GB"
    nvml.inject(None, "nvmlDeviceGetCount", "NO_PERMISSION")
    with pytest.raises(pynvml.NVMLError_NoPermission):
        pynvml.nvmlDeviceGetCount()


def test_no_state_file_is_driver_not_loaded(fake_gpus) -> None:
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        pynvml.nvmlInit()


def test_workload_appears_and_disappears(nvml) -> None:
    proc = nvml.spawn_workload(visible="1,3", mem="10G", util=30)
    assert _pids(1) == [proc.pid] and _pids(3) == [proc.pid] and _pids(0) == []
    h = pynvml.nvmlDeviceGetHandleByIndex(3)
    assert pynvml.nvmlDeviceGetMemoryInfo(h).used == 10 << 30
    assert pynvml.nvmlDeviceGetUtilizationRates(h).gpu == 30
    assert pynvml.nvmlDeviceGetComputeRunningProcesses(h)[0].usedGpuMemory == 10 << 30
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert _pids(1) == [] and pynvml.nvmlDeviceGetMemoryInfo(h).used == 0
    # the registration file is still there: the library ignores it because the pid is dead
    assert os.path.exists(os.path.join(nvml.procs_dir, str(proc.pid)))


def test_workload_unregisters_on_sigterm_and_records(nvml, tmp_path) -> None:
    record = tmp_path / "rec.jsonl"
    proc = nvml.spawn_workload(visible=nvml.uuids[2][:12], args=["--record", str(record)])
    assert _pids(2) == [proc.pid]
    proc.terminate()
    assert proc.wait() == -signal.SIGTERM
    assert not os.path.exists(os.path.join(nvml.procs_dir, str(proc.pid)))
    lines = record.read_text().splitlines()
    assert len(lines) == 2 and '"start"' in lines[0] and '"signal": 15' in lines[1]


@pytest.mark.parametrize(
    ("cvd", "expected"),
    [("0,2", [0, 2]), ("2,0", [2, 0]), ("0,junk,2", [0]), ("1,1,2", [1]), ("3,9,1", [3]), ("", [])],
)
def test_workload_reads_cuda_visible_devices(nvml, tmp_path, cvd, expected) -> None:
    proc = nvml.workload_cmd("--print", "--seconds", "0", "--allow-no-gpu")
    import subprocess

    out = subprocess.run(
        proc,
        env={**nvml.env, "CUDA_VISIBLE_DEVICES": cvd},
        capture_output=True,
        text=True,
        check=True,
    )
    import json

    assert json.loads(out.stdout)["gpus"] == [nvml.uuids[i] for i in expected]


def test_workload_exit_code_and_short_run(nvml) -> None:
    proc = nvml.spawn_workload(visible="0", seconds=0.3, args=["--exit-code", "7"])
    assert proc.wait(timeout=10) == 7
    wait_until(lambda: _pids(0) == [])


def test_workload_children_share_its_process_group(nvml) -> None:
    proc = nvml.spawn_workload(visible="0", args=["--children", "2", "--child-mem", "1G"])
    wait_until(lambda: len(_pids(0)) == 3)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_until(lambda: _pids(0) == [], timeout=10)


def test_workload_can_ignore_sigterm(nvml) -> None:
    proc = nvml.spawn_workload(visible="0", args=["--ignore-term"])
    proc.terminate()
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.3)
    assert _pids(0) == [proc.pid]
    proc.kill()
    assert proc.wait() == -signal.SIGKILL
