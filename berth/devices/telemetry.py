"""The readings NVIDIA's DCGM exporter exports by default, read from NVML: clocks, memory
temperature, energy, PCIe and NVLink traffic, encoder and decoder use, and the last XID error.

:func:`read` gives them as :class:`~berth.devices.model.GpuSnapshot` fields for one GPU; a
reading the driver does not give (or fails to give) is None. Only a process that asked for
them with :func:`want` reads them, and only on the telemetry path: the daemon serving /metrics
(``berth.web.server``); ``berth status`` and ``berth select`` start fast and never do. None of
these calls blocks (NVML's ``nvmlDeviceGetPcieThroughput`` samples for 20 ms: PCIe traffic is
read from the byte counters instead, where the driver has them).

XID errors are events, not readings: NVML tells them to an event set registered per GPU.
:data:`XIDS` registers each GPU the first time it is read, drains the set (without waiting) at
each read of all GPUs and remembers the last XID per GPU: 0 until one comes; None where the GPU
cannot report them (no event support, no permission).
"""

from __future__ import annotations

import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any

_CLOCK_SM, _CLOCK_MEM = 1, 2  # NVML_CLOCK_SM, NVML_CLOCK_MEM
_FI_PCIE_TX, _FI_PCIE_RX = 197, 198  # NVML_FI_DEV_PCIE_COUNT_TX_BYTES, _RX_BYTES
_FI_MEMORY_TEMP = 82  # NVML_FI_DEV_MEMORY_TEMP
# NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX: cumulative KiB of the whole GPU (asked without
# a link as scope, as NVIDIA's own collectors do).
_FI_NVLINK_TX, _FI_NVLINK_RX = 138, 139
_XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError
_TIMEOUT = 10  # NVML_ERROR_TIMEOUT: no event waiting
_MAX_EVENTS = 256  # drained per read at most (an XID storm cannot hold the reader)


_wanted = False


def want(on: bool = True) -> None:
    """Read these in this process's telemetry reads from now on (or no longer)."""
    global _wanted
    _wanted = on


def wanted() -> bool:
    return _wanted


def read(nvml: ModuleType, handle: Any, index: int) -> dict[str, Any]:
    """The telemetry fields of one GPU (GpuSnapshot's names), None where not given.

    Any NVML error gives None and never marks the GPU unhealthy: these are extras for the
    dashboards (a driver may refuse a field another answers), and the readings scheduling
    depends on (:mod:`berth.devices.nvml`) already tell a GPU that fails."""

    def read(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except nvml.NVMLError:
            return None

    enc = read(nvml.nvmlDeviceGetEncoderUtilization, handle)
    dec = read(nvml.nvmlDeviceGetDecoderUtilization, handle)
    fields = read(
        nvml.nvmlDeviceGetFieldValues,
        handle,
        [_FI_MEMORY_TEMP, _FI_PCIE_TX, _FI_PCIE_RX, _FI_NVLINK_TX, _FI_NVLINK_RX],
    )
    mem_temp, pcie_tx, pcie_rx, nvlink_tx, nvlink_rx = field_values(fields, 5)
    return {
        "sm_clock": read(nvml.nvmlDeviceGetClockInfo, handle, _CLOCK_SM),
        "memory_clock": read(nvml.nvmlDeviceGetClockInfo, handle, _CLOCK_MEM),
        "memory_temperature": mem_temp,
        "energy": read(nvml.nvmlDeviceGetTotalEnergyConsumption, handle),
        "pcie_tx": pcie_tx,
        "pcie_rx": pcie_rx,
        "pcie_replays": read(nvml.nvmlDeviceGetPcieReplayCounter, handle),
        "encoder_utilization": enc[0] if enc is not None else None,
        "decoder_utilization": dec[0] if dec is not None else None,
        "nvlink_tx": nvlink_tx,
        "nvlink_rx": nvlink_rx,
        "last_xid": XIDS.last(nvml, handle, index),
    }


def field_values(values: Any, n: int) -> list[int | None]:
    """NVML field values as integers; None for each one NVML did not give."""
    if values is None:
        return [None] * n
    out: list[int | None] = []
    for v in values:
        if v.nvmlReturn != 0:
            out.append(None)
        elif v.valueType == 0:  # NVML_VALUE_TYPE_DOUBLE
            out.append(int(v.value.dVal))
        elif v.valueType in (1, 5):  # UNSIGNED_INT, SIGNED_INT
            out.append(int(v.value.uiVal if v.valueType == 1 else v.value.siVal))
        elif v.valueType == 4:  # SIGNED_LONG_LONG
            out.append(int(v.value.sllVal))
        else:  # UNSIGNED_LONG (2), UNSIGNED_LONG_LONG (3)
            out.append(int(v.value.ullVal))
    return out


class Xids:
    """The last XID error of each GPU, from one NVML event set (see the module's docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set: Any = None
        self._watched: dict[int, bool] = {}  # index -> registered (False: cannot report)
        self._last: dict[int, int] = {}

    def forget(self) -> None:
        """NVML was shut down: the event set is gone; register again on the next read (and
        count XIDs from there)."""
        with self._lock:
            self._set = None
            self._watched.clear()
            self._last.clear()

    def drain(self, nvml: ModuleType) -> None:
        """Take every XID event waiting (never waits)."""
        with self._lock:
            if self._set is None:
                return
            for _ in range(_MAX_EVENTS):
                try:
                    event = nvml.nvmlEventSetWait_v2(self._set, 0)
                    index = nvml.nvmlDeviceGetIndex(event.device)
                except nvml.NVMLError as e:
                    if e.value != _TIMEOUT:
                        self._set = None  # a broken set: make a new one on the next read
                        self._watched.clear()
                    return
                if event.eventType & _XID_EVENT:
                    self._last[index] = int(event.eventData)

    def last(self, nvml: ModuleType, handle: Any, index: int) -> int | None:
        with self._lock:
            if index not in self._watched:
                self._watched[index] = self._register(nvml, handle)
            return self._last.get(index, 0) if self._watched[index] else None

    def _register(self, nvml: ModuleType, handle: Any) -> bool:
        """Watch one GPU's XIDs; False where it cannot report them. Never marks the GPU
        unhealthy: events are an extra, its readings say whether it works."""
        try:
            if self._set is None:
                self._set = nvml.nvmlEventSetCreate()
            nvml.nvmlDeviceRegisterEvents(handle, _XID_EVENT, self._set)
        except nvml.NVMLError:
            return False
        return True


XIDS = Xids()
