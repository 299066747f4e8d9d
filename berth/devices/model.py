"""Frozen snapshots of GPUs and their processes.

A :class:`GpuSnapshot` is one consistent read of one GPU. Values the driver does not support are
``None``, never an exception. A GPU whose reads fail (``GPU_IS_LOST`` and the like) is still
reported, with ``healthy=False`` and the error, so that nothing silently disappears.

Plain slotted classes rather than dataclasses: ``dataclasses`` costs ~7 ms of import time, and
the CLI that reads these runs constantly.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class _Frozen:
    __slots__: tuple[str, ...] = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def _init(self, **values: object) -> None:
        for key, value in values.items():
            object.__setattr__(self, key, value)

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, k) for k in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined,unused-ignore]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def replace(self, **changes: Any) -> Any:
        """A copy with some fields changed (like ``dataclasses.replace``)."""
        values = {k: getattr(self, k) for k in self.__slots__}
        values.update(changes)
        return type(self)(**values)


class GpuProcess(_Frozen):
    """A process that uses a GPU, as NVML reports it, with what /proc tells of it."""

    __slots__ = ("pid", "used_memory", "kind", "user", "command")

    pid: int
    used_memory: int | None  # bytes; None where the driver cannot say (e.g. no permission)
    kind: str  # "compute" or "graphics" (or "compute+graphics")
    user: str | None  # None where the process is not visible (another PID namespace)
    command: str | None

    def __init__(
        self,
        pid: int,
        used_memory: int | None = None,
        kind: str = "compute",
        user: str | None = None,
        command: str | None = None,
    ) -> None:
        self._init(pid=pid, used_memory=used_memory, kind=kind, user=user, command=command)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


class GpuSnapshot(_Frozen):
    """One consistent read of one GPU.

    ``index`` is the NVML index, which is PCI bus order; ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` makes
    CUDA number devices the same way. Memory is in bytes, power in watts, utilisation in percent.
    ``logical`` GPUs come from a declared inventory: they have no telemetry (every reading is
    None) and are selected on claims alone.
    """

    __slots__ = (
        "index",
        "uuid",
        "name",
        "pci_bus_id",
        "memory_total",
        "memory_used",
        "memory_free",
        "utilization",
        "memory_utilization",
        "power_draw",
        "power_limit",
        "temperature",
        "performance_state",
        "processes",
        "healthy",
        "error",
        "logical",
    )

    index: int
    uuid: str
    name: str
    pci_bus_id: str | None
    memory_total: int | None
    memory_used: int | None
    memory_free: int | None
    utilization: int | None
    memory_utilization: int | None
    power_draw: float | None
    power_limit: float | None
    temperature: int | None
    performance_state: int | None
    processes: tuple[GpuProcess, ...] | None  # None: could not be read
    healthy: bool
    error: str | None
    logical: bool

    def __init__(
        self,
        index: int,
        uuid: str,
        name: str,
        pci_bus_id: str | None = None,
        memory_total: int | None = None,
        memory_used: int | None = None,
        memory_free: int | None = None,
        utilization: int | None = None,
        memory_utilization: int | None = None,
        power_draw: float | None = None,
        power_limit: float | None = None,
        temperature: int | None = None,
        performance_state: int | None = None,
        processes: tuple[GpuProcess, ...] | None = (),
        healthy: bool = True,
        error: str | None = None,
        logical: bool = False,
    ) -> None:
        self._init(
            index=index,
            uuid=uuid,
            name=name,
            pci_bus_id=pci_bus_id,
            memory_total=memory_total,
            memory_used=memory_used,
            memory_free=memory_free,
            utilization=utilization,
            memory_utilization=memory_utilization,
            power_draw=power_draw,
            power_limit=power_limit,
            temperature=temperature,
            performance_state=performance_state,
            processes=processes,
            healthy=healthy,
            error=error,
            logical=logical,
        )

    @property
    def process_count(self) -> int | None:
        return None if self.processes is None else len(self.processes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field, processes as a list of dicts."""
        out: dict[str, Any] = {k: getattr(self, k) for k in self.__slots__}
        out["processes"] = (
            None if self.processes is None else [p.to_dict() for p in self.processes]
        )
        return out
