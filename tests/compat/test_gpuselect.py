"""Gpuselect README examples, with only the import line changed."""

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


# gpuselect 0.1.4's GpuInfo, field by field and in its order (issue 27, point 7).
GPUSELECT_FIELDS = (
    "device", "name", "util", "mem_util", "mem_free", "mem_used", "mem_total", "processes",
    "fan_speed", "effective_power_limt", "performance_state", "power_usage", "temperature",
    "is_throttling",
)  # fmt: skip


def test_gpuinfo_has_gpuselects_fields_in_its_order():
    assert GpuInfo._fields == GPUSELECT_FIELDS


def test_a_selector_reads_every_field_by_name_and_position(gpus):
    gpus.update(1, fan=55, clocks_event_reasons=0x4)  # software power cap: throttling
    seen: dict[int, GpuInfo] = {}

    def selector(info: GpuInfo) -> bool:
        seen[info.device] = info
        return info.fan_speed == 55 and info[13] == 1  # (by position, as tuples allow)

    assert gpuselect(selector=selector) == "1"
    one, zero = seen[1], seen[0]
    assert one.effective_power_limt == 400000 and one.power_usage == 60000  # milliwatts
    assert one.mem_total == 48 * 2**30 and one.mem_free == one.mem_total and one.mem_used == 0
    assert (zero.fan_speed, zero.is_throttling, zero.performance_state) == (30, 0, 0)
    assert seen[3].processes == 1 and seen[3].util == 3


def test_full_clocks_are_not_throttling(gpus):
    gpus.update(0, clocks_event_reasons=0)  # (gpuselect 0.1.4 read this as throttling)
    gpus.update(2, clocks_event_reasons=None)  # not supported: unknown, not a guess
    infos = {}
    gpuselect(selector=lambda i: infos.setdefault(i.device, i) is None, silent=True)
    assert infos[0].is_throttling == 0 and infos[2].is_throttling is None


def test_the_cli_takes_gpuselects_option_names(gpus):
    out = gpus.berth("select", "--util", "10", "--mem_util", "10", "--processes", "1",
                     "--devices", "3")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3"
    two = gpus.berth("select", "-c", "2", "--devices", "0,1")
    assert sorted(two.stdout.strip().split(",")) == ["0", "1"]
    quiet = gpus.berth("select", "-q", "--devices", "3")
    assert quiet.returncode == 1 and quiet.stdout == "" and quiet.stderr == ""
