"""The DCGM exporter's readings in GpuSnapshot (berth/devices/telemetry.py): read with
telemetry, never on the fast path of `berth select`, None where the GPU does not give them;
XID errors come as events, the last one kept per GPU."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from berth.devices import nvml, read_gpus, telemetry
from berth.devices.telemetry import XIDS

READINGS = {
    "sm_clock": 1980, "mem_clock": 2619, "energy_mj": 5_000_000_000, "memory_temp": 52,
    "pcie_tx_bytes": 7, "pcie_rx_bytes": 8, "pcie_replay": 1, "enc_util": 3, "dec_util": 4,
    "nvlink_tx_kib": 10, "nvlink_rx_kib": 20, "xid": [48],
}  # fmt: skip
FIELDS = {
    "sm_clock": 1980, "memory_clock": 2619, "energy": 5_000_000_000, "memory_temperature": 52,
    "pcie_tx": 7, "pcie_rx": 8, "pcie_replays": 1, "encoder_utilization": 3,
    "decoder_utilization": 4, "nvlink_tx": 10, "nvlink_rx": 20,
    "last_xid": 0,  # (48 came before anyone watched)
}  # fmt: skip


@pytest.fixture(autouse=True)
def wanted() -> Iterator[None]:
    """As the daemon serving /metrics does."""
    telemetry.want()
    try:
        yield
    finally:
        telemetry.want(False)


def snapshot_fields(g: Any) -> dict[str, Any]:
    return {k: getattr(g, k) for k in FIELDS}


def test_readings_with_telemetry_none_where_unsupported(fake_gpus: Any) -> None:
    fake_gpus.setup(2, **READINGS)
    fake_gpus.update(1, **{k: None for k in READINGS})
    gpus = read_gpus()
    assert snapshot_fields(gpus[0]) == FIELDS
    assert snapshot_fields(gpus[1]) == dict.fromkeys(FIELDS)
    assert all(g.healthy for g in gpus)  # unsupported is no fault


def test_not_read_where_not_wanted(fake_gpus: Any) -> None:
    fake_gpus.setup(1, **READINGS)
    telemetry.want(False)  # `berth status`: telemetry, but not these
    (g,) = read_gpus()
    assert snapshot_fields(g) == dict.fromkeys(FIELDS) and g.temperature == 35
    assert XIDS._set is None


def test_select_fast_path_reads_none_of_them(fake_gpus: Any) -> None:
    fake_gpus.setup(1, **READINGS)
    nvml.reset()
    (g,) = read_gpus(process_details=False, telemetry=False)
    assert snapshot_fields(g) == dict.fromkeys(FIELDS)
    assert XIDS._set is None  # no event set made either
    # Every telemetry call failing would not touch that path.
    fake_gpus.inject(0, "nvmlDeviceGetClockInfo", "UNKNOWN")
    fake_gpus.inject(0, "nvmlDeviceGetFieldValues", "UNKNOWN")
    (g,) = read_gpus(process_details=False, telemetry=False)
    assert g.healthy
    (g,) = read_gpus(process_details=False)  # with telemetry: read, failing
    assert g.healthy and g.sm_clock is None and g.memory_temperature is None  # (extras only)
    assert g.energy == 5_000_000_000


def test_the_last_xid_is_kept_per_gpu(fake_gpus: Any) -> None:
    fake_gpus.setup(2, xid=[])
    nvml.reset()
    assert [g.last_xid for g in read_gpus()] == [0, 0]  # watching now
    fake_gpus.update(1, xid=[31, 79])
    assert [g.last_xid for g in read_gpus()] == [0, 79]
    fake_gpus.update(0, xid=[13])
    assert [g.last_xid for g in read_gpus()] == [13, 79]  # kept until another comes
    nvml.reset()  # a new NVML session counts from its start
    assert [g.last_xid for g in read_gpus()] == [0, 0]
