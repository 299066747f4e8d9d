"""GPU Scheduler (gpu_scheduler) utility examples, with only the import line changed."""

from __future__ import annotations

import pytest

from berth.compat import gpu_scheduler
from berth.compat.gpu_scheduler import (
    find_free_gpus,
    get_gpu_info,
    get_gpu_memory_usage,
    get_gpu_names,
    get_gpu_power_usage,
    get_gpu_utilization,
    get_total_num_gpus,
)

INFO_KEYS = {
    "gpu_id",
    "name",
    "memory_used",
    "memory_total",
    "memory_free",
    "power_draw",
    "power_limit",
    "utilization",
}


@pytest.fixture
def gpus(fake_gpus, monkeypatch):
    fake_gpus.setup(n=4, memory="40G")
    fake_gpus.spawn_workload(visible="1", mem="30G", util=60)
    fake_gpus.update(2, power_mw=120000)
    fake_gpus.update(3, name="Quadro RTX 6000")
    monkeypatch.setattr(gpu_scheduler, "BANNED_GPUS", [])
    monkeypatch.setattr(gpu_scheduler, "BANNED_GPU_NAMES", [])
    return fake_gpus


def test_readme_gpu_information_example(gpus, capsys):
    # Get comprehensive GPU information
    gpu_info = get_gpu_info()
    for gpu in gpu_info:
        print(f"GPU {gpu['gpu_id']}: {gpu['name']}")
        print(f"  Memory: {gpu['memory_free']}MB free / {gpu['memory_total']}MB total")
        print(f"  Power: {gpu['power_draw']}W / {gpu['power_limit']}W")
        print(f"  Utilization: {gpu['utilization']}%")

    # Find free GPUs
    free_gpus = find_free_gpus(
        memory_free_threshold_gb=20, power_threshold_w=50, utilization_threshold_percent=1
    )
    print(f"Found {len(free_gpus)} free GPUs")
    out = capsys.readouterr().out
    assert "GPU 1: NVIDIA A100-SXM4-80GB" in out
    assert "  Memory: 10240MB free / 40960MB total" in out
    assert "  Power: 60.0W / 400.0W" in out
    assert "  Utilization: 60%" in out
    assert "Found 0 free GPUs" in out  # every GPU draws 60 W or more


def test_info_keys_and_units(gpus):
    info = get_gpu_info()
    assert [g["gpu_id"] for g in info] == [0, 1, 2, 3]
    assert all(set(g) == INFO_KEYS for g in info)
    assert info[1]["memory_used"] == 30 * 1024 and info[2]["power_draw"] == 120.0
    assert get_gpu_memory_usage()[1] == {
        "gpu_id": 1,
        "memory_used": 30 * 1024,
        "memory_total": 40 * 1024,
        "memory_free": 10 * 1024,
    }
    assert get_gpu_names()[3] == {"gpu_id": 3, "name": "Quadro RTX 6000"}
    assert get_gpu_power_usage()[0] == {"gpu_id": 0, "power_draw": 60.0, "power_limit": 400.0}
    assert get_gpu_utilization()[1] == {"gpu_id": 1, "utilization": 60}
    assert get_total_num_gpus() == 4


def test_find_free_gpus_thresholds(gpus):
    free = find_free_gpus(memory_free_threshold_gb=20, power_threshold_w=80)
    assert [g["gpu_id"] for g in free] == [0, 3]
    assert set(free[0]) == INFO_KEYS
    assert [g["gpu_id"] for g in find_free_gpus(20)] == [0, 2, 3]
    assert find_free_gpus(0, None, 100) == [{"gpu_id": k} for k in range(4)]
    assert [g["gpu_id"] for g in find_free_gpus(20, specific_gpus=[2, 3])] == [2, 3]


def test_banned_lists_and_visible_renumbering(gpus, monkeypatch):
    gpu_scheduler.BANNED_GPUS = [0]
    gpu_scheduler.BANNED_GPU_NAMES.append("Quadro RTX 6000")
    assert [g["gpu_id"] for g in find_free_gpus(20)] == [2]
    assert find_free_gpus(0, None, 100) == [{"gpu_id": 1}, {"gpu_id": 2}]
    gpu_scheduler.BANNED_GPUS = []
    gpu_scheduler.BANNED_GPU_NAMES.clear()
    # PyTorch order: gpu_id is the position among CUDA_VISIBLE_DEVICES
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert [g["name"] for g in get_gpu_names()] == ["NVIDIA A100-SXM4-80GB", "Quadro RTX 6000"]
    assert [g["gpu_id"] for g in get_gpu_info()] == [0, 1]
    assert get_gpu_power_usage()[0]["power_draw"] == 120.0
    assert get_total_num_gpus() == 2


def test_power_not_supported_reads_zero_but_fails_a_power_filter(gpus):
    gpus.update(0, power_mw=None)
    assert get_gpu_power_usage()[0]["power_draw"] == 0.0
    assert 0 not in [g["gpu_id"] for g in find_free_gpus(20, power_threshold_w=80)]
    assert 0 in [g["gpu_id"] for g in find_free_gpus(20)]


def test_without_a_driver_every_function_raises_instead_of_returning_nothing(fake_gpus):
    """docs/select.md: "without a driver the functions raise `berth.errors.NvmlUnavailable`
    instead of returning `[]`" (an empty list reads as "no GPU is free": a script would wait
    for ever, or run on the CPU)."""
    from berth.errors import NvmlUnavailable

    # (no state file: the fake library answers as a machine whose driver is not loaded)
    for fn in (get_gpu_info, get_gpu_memory_usage, get_gpu_names, get_gpu_power_usage,
               get_gpu_utilization, get_total_num_gpus, find_free_gpus):  # fmt: skip
        with pytest.raises(NvmlUnavailable, match="driver"):
            fn()
