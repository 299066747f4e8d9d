"""Frozen snapshots of GPUs and their processes.

A :class:`GpuSnapshot` is one consistent read of one GPU. Values the driver does not support are
``None``, never an exception. A GPU whose reads fail (``GPU_IS_LOST`` and the like) is still
reported, with ``healthy=False`` and the error, so that nothing silently disappears.

Records (:mod:`berth.record`) rather than dataclasses: ``dataclasses`` costs ~7 ms of import
time, and the CLI that reads these runs constantly.
"""

from __future__ import annotations

from berth.record import Record, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@record
class GpuProcess(Record):
    """A process that uses a GPU, as NVML reports it, with what /proc tells of it."""

    pid: int
    used_memory: int | None = None  # bytes; None where the driver cannot say (no permission)
    kind: str = "compute"  # "compute" or "graphics" (or "compute+graphics")
    user: str | None = None  # None where the process is not visible (another PID namespace)
    command: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__fields__}


@record
class GpuSnapshot(Record):
    """One consistent read of one GPU.

    ``index`` is the NVML index, which is PCI bus order; ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` makes
    CUDA number devices the same way. Memory is in bytes, power in watts, utilisation in percent.
    ``logical`` GPUs come from a declared inventory: they have no telemetry (every reading is
    None) and are selected on claims alone.
    """

    index: int
    uuid: str
    name: str
    pci_bus_id: str | None = None
    memory_total: int | None = None
    memory_used: int | None = None
    memory_free: int | None = None
    memory_reserved: int | None = None  # kept by the driver (not in used; None: not said)
    utilization: int | None = None
    memory_utilization: int | None = None
    power_draw: float | None = None
    power_limit: float | None = None
    temperature: int | None = None
    performance_state: int | None = None
    fan_speed: int | None = None  # % of the fan's maximum; None for passively cooled GPUs
    clocks_event_reasons: int | None = None  # NVML's bit mask of why clocks are not at max
    # What the DCGM exporter's default counters name (berth.devices.telemetry: read only
    # where a process wants them, the daemon serving /metrics, and with telemetry):
    sm_clock: int | None = None  # MHz
    memory_clock: int | None = None  # MHz
    memory_temperature: int | None = None  # C (HBM cards)
    energy: int | None = None  # mJ consumed since the driver loaded (a counter)
    pcie_tx: int | None = None  # bytes sent over PCIe since the driver loaded (a counter)
    pcie_rx: int | None = None  # bytes received over PCIe (a counter)
    pcie_replays: int | None = None  # PCIe retries since the driver loaded (a counter)
    encoder_utilization: int | None = None  # %
    decoder_utilization: int | None = None  # %
    nvlink_tx: int | None = None  # KiB sent over NVLink (a counter)
    nvlink_rx: int | None = None  # KiB received over NVLink (a counter)
    last_xid: int | None = None  # the last XID error seen since this process watched; 0: none
    processes: tuple[GpuProcess, ...] | None = ()  # None: could not be read
    healthy: bool = True
    error: str | None = None
    logical: bool = False

    @property
    def process_count(self) -> int | None:
        return None if self.processes is None else len(self.processes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field, processes as a list of dicts."""
        out: dict[str, Any] = {k: getattr(self, k) for k in self.__fields__}
        out["processes"] = None if self.processes is None else [p.to_dict() for p in self.processes]
        return out
