"""`berth status` asks NVML, per GPU, for what its screen shows and no more (issue 35).

The fake library appends each C function called to ``$FAKE_NVML_CALLS``; the screen's reads
are counted there, so a reading added to the plain screen's path without being shown (or a
batched call split again) fails here.
"""

from __future__ import annotations

import json
from collections import Counter

# What the screen shows, per GPU: the handle, the UUID (claims and bans are matched by it),
# name, memory, utilisations, power drawn and its limit (one field-values call), temperature,
# and the processes (compute and graphics; NVML's two-call protocol where there are some).
SHOWN = {
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetName",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
}
# The pynvml floor (memory, utilisation, compute processes) asks 3 per GPU (+1 handle).
MAX_PER_GPU = 10


def _calls(fake_gpus, tmp_path, *args):
    path = tmp_path / "calls"
    path.write_text("")
    r = fake_gpus.berth(*args, env={"FAKE_NVML_CALLS": str(path)})
    assert r.returncode == 0, r.stderr
    names = [line.split()[0] for line in path.read_text().splitlines()]
    per_gpu = Counter(n for n in names if n.startswith("nvmlDevice") and "GetCount" not in n)
    return r, per_gpu


def test_status_asks_nvml_per_gpu_only_what_it_shows(fake_gpus, tmp_path) -> None:
    n = 4
    fake_gpus.setup(n=n)
    w = fake_gpus.spawn_workload(visible="1", mem="10G", util=50)
    r, calls = _calls(fake_gpus, tmp_path, "status")
    assert set(calls) <= SHOWN, f"not shown, still read: {set(calls) - SHOWN}"
    assert sum(calls.values()) <= MAX_PER_GPU * n, calls
    assert calls["nvmlDeviceGetFieldValues"] == n  # power and its limit: one call a GPU
    # ... and the screen still shows them all
    row = next(line for line in r.stdout.splitlines() if line.split()[:1] == ["1"])
    assert "60W/400W" in row and "35C" in row and "50%" in row and "busy" in row
    assert str(w.pid) in r.stdout


def test_status_json_reads_the_rest(fake_gpus, tmp_path) -> None:
    fake_gpus.setup(n=2)
    r, calls = _calls(fake_gpus, tmp_path, "status", "--json")
    assert {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPerformanceState",
            "nvmlDeviceGetFanSpeed"} <= set(calls)  # fmt: skip
    g = json.loads(r.stdout)["gpus"][0]
    assert g["pci_bus_id"] is not None and g["performance_state"] == 0 and g["fan_speed"] == 30
    assert g["power_draw"] == 60.0 and g["power_limit"] == 400.0


def test_power_without_the_fields_is_read_by_its_calls(fake_gpus, tmp_path) -> None:
    """A driver without the power fields (before R535, GA100 and older for the average):
    each is read by its own call, and the screen is the same."""
    fake_gpus.setup(n=2)
    fake_gpus.inject(0, "nvmlDeviceGetFieldValues", "NOT_SUPPORTED")
    r, calls = _calls(fake_gpus, tmp_path, "status")
    assert calls["nvmlDeviceGetPowerUsage"] == 1 and calls["nvmlDeviceGetEnforcedPowerLimit"] == 1
    rows = [line for line in r.stdout.splitlines() if line.split()[:1] in (["0"], ["1"])]
    assert len(rows) == 2 and all("60W/400W" in row for row in rows), r.stdout


def test_a_lost_gpu_is_still_told_through_the_power_fields(fake_gpus) -> None:
    """The fields call never hides a failing GPU: a field refused with a hard error is asked
    again by its own call, which marks the GPU unhealthy."""
    fake_gpus.setup(n=2)
    fake_gpus.inject(1, "nvmlDeviceGetPowerUsage", "GPU_IS_LOST")
    r = fake_gpus.berth("status", "--json")
    assert r.returncode == 0, r.stderr
    g = json.loads(r.stdout)["gpus"][1]
    assert g["healthy"] is False and "GetPowerUsage" in g["error"] and g["power_draw"] is None
