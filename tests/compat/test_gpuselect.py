"""Seed 001 (gpuselect) README examples, with only the import line changed."""

from __future__ import annotations

import logging
import os

import pytest

from berth.compat import gpuselect as gs_module
from berth.compat.gpuselect import GpuInfo, gpuselect, gpustatus

STATUS_KEYS = {
    "device",
    "name",
    "utilization",
    "mem_utilization",
    "processes",
    "performance_state",
    "power_usage",
    "temperature",
}


@pytest.fixture
def gpus(fake_gpus):
    """4 GPUs: 0, 1 RTX A6000 idle; 2 RTX 3090 idle; 3 RTX 3090 busy."""
    fake_gpus.setup(n=4, name="NVIDIA RTX A6000", memory="48G")
    fake_gpus.update(2, name="NVIDIA GeForce RTX 3090")
    fake_gpus.update(3, name="NVIDIA GeForce RTX 3090")
    fake_gpus.spawn_workload(visible="3", mem="2G", util=3)
    return fake_gpus


def test_default_sets_cuda_visible_devices(gpus):
    value = gpuselect()
    assert value in {"0", "1", "2"}
    assert os.environ["CUDA_VISIBLE_DEVICES"] == value
    assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_by_name(gpus):
    assert gpuselect(name="A6000") in {"0", "1"}
    assert sorted(gpuselect(count=2, name="A6000").split(",")) == ["0", "1"]


def test_relaxed_thresholds(gpus):
    chosen = set()
    for _ in range(40):
        chosen.update(gpuselect(util=10, processes=1).split(","))
    assert "3" in chosen  # the busy 3090 at 3% with one process now qualifies
    with pytest.raises(Exception, match="Requested 4 GPUs, but 3 matched"):
        gpuselect(count=4)


def test_devices(gpus):
    assert gpuselect(devices=0) == "0"
    assert sorted(gpuselect(devices=[0, 1]).split(",")) == ["0", "1"]
    with pytest.raises(Exception, match="Invalid device ID 9"):
        gpuselect(devices=9)
    with pytest.raises(Exception, match="only one of 'devices' and 'name'"):
        gpuselect(devices=0, name="A6000")
    with pytest.raises(Exception):  # noqa: B017 (gpuselect raises a plain Exception)
        gpuselect(devices=3)


def test_custom_selector(gpus):
    seen: list[GpuInfo] = []

    def custom_select(gpu: GpuInfo) -> bool:
        seen.append(gpu)
        # match any device with "3090" in the name and <= 5% utilization
        return "3090" in gpu.name and gpu.util <= 5

    values = {gpuselect(selector=custom_select) for _ in range(30)}
    assert values == {"2", "3"}
    g = seen[0]
    assert (g.device, g.util, g.mem_util, g.processes) == (0, 0, 0, 0)


def test_handling_errors(gpus):
    try:
        gpuselect(count=4)
        raise AssertionError("should have raised")
    except Exception as e:
        assert "Failed" not in str(e) and "GPU 3" in str(e)
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    assert gpuselect(count=4, silent=True) == ""
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == before


def test_debug_logging(gpus, caplog):
    logging.getLogger("gpuselect").setLevel(logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG, logger="gpuselect"):
            gpuselect()
    finally:
        logging.getLogger("gpuselect").setLevel(logging.NOTSET)
    assert gs_module.logger.name == "gpuselect"
    messages = [r.getMessage() for r in caplog.records if r.name == "gpuselect"]
    assert any("Device 3" in m and "process" in m for m in messages)
    assert any(m.startswith("CUDA_VISIBLE_DEVICES=") for m in messages)


def test_gpustatus(gpus, monkeypatch):
    gpu_info = gpustatus()
    assert [d["device"] for d in gpu_info] == [0, 1, 2, 3]
    for d in gpu_info:
        assert set(d) == STATUS_KEYS
    assert gpu_info[3]["processes"] == 1 and gpu_info[3]["utilization"] == 3
    assert gpu_info[0]["power_usage"] == 60000  # milliwatts
    assert gpu_info[0]["temperature"] == 35 and gpu_info[0]["performance_state"] == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
    assert [d["device"] for d in gpustatus()] == [1, 2]
    assert len(gpustatus(only_cvd=False)) == 4
