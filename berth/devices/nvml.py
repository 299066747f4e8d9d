"""The NVML session and the one read that turns NVML's answers into :class:`GpuSnapshot`.

Every NVML call goes through :func:`session` (lazy ``nvmlInit`` once per process, under a
lock; ``nvmlShutdown`` at exit) and, for readings, through :func:`_read` (one wrapper that
classifies errors):

- "no value" errors (not supported, no data, no permission, a function this driver lacks)
  give ``None`` for that reading;
- any other NVML error on a GPU (GPU_IS_LOST, UNKNOWN, RESET_REQUIRED, ...) marks the GPU
  ``healthy=False`` with the error text; the GPU is still reported, never dropped.

Only ``pynvml.NVMLError`` is caught, never everything. Nothing here imports ``dataclasses``
or ``typing``, and process details are read from ``/proc`` only when asked for: ``berth
select`` runs this path on every call and must start fast.
"""

from __future__ import annotations

import atexit
import os
import pwd
import threading

import pynvml

from berth.devices import telemetry as dcgm
from berth.devices.model import GpuProcess, GpuSnapshot
from berth.errors import NvmlUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any

# NVML_ERROR_*: no value for this reading, the GPU is fine.
_NO_VALUE = {
    3,  # NOT_SUPPORTED
    4,  # NO_PERMISSION
    13,  # FUNCTION_NOT_FOUND (an older driver)
    21,  # NO_DATA
}
_NO_V2 = {13, 25}  # FUNCTION_NOT_FOUND, ARGUMENT_VERSION_MISMATCH: a driver without v2
_PSTATE_UNKNOWN = 32
_FI_POWER, _FI_POWER_LIMIT = 185, 190  # NVML_FI_DEV_POWER_AVERAGE, _POWER_CURRENT_LIMIT
_HOW_TO_DECLARE = (
    "to use berth without a driver, declare an inventory ([inventory] gpus = N in the config "
    "file); see `berth help config`"
)

_lock = threading.Lock()
_nvml: ModuleType | None = None  # pynvml, once initialised


def _init_error(pynvml: ModuleType, e: Exception) -> NvmlUnavailable:
    code = getattr(e, "value", None)
    if code == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
        return NvmlUnavailable(
            "NVIDIA driver not found: libnvidia-ml.so.1 could not be loaded; install the "
            f"NVIDIA driver (or add its directory to LD_LIBRARY_PATH), or {_HOW_TO_DECLARE}"
        )
    if code == pynvml.NVML_ERROR_DRIVER_NOT_LOADED:
        return NvmlUnavailable(
            "NVIDIA driver not loaded: libnvidia-ml.so.1 is installed but the kernel driver is "
            f"not running (check `lsmod | grep nvidia`, or reboot after a driver install), or "
            f"{_HOW_TO_DECLARE}"
        )
    if code == pynvml.NVML_ERROR_NO_PERMISSION:
        return NvmlUnavailable(
            "NVML refused access: no permission to open the NVIDIA devices (/dev/nvidia*); ask "
            f"the admin to grant access, or {_HOW_TO_DECLARE}"
        )
    if code == pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return NvmlUnavailable(
            "NVIDIA driver/library version mismatch: libnvidia-ml.so.1 does not match the "
            "loaded kernel driver (usually after a driver upgrade); reboot or reload the driver"
        )
    if code == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND:
        return NvmlUnavailable(
            "NVIDIA driver too old: libnvidia-ml.so.1 lacks nvmlInitWithFlags; upgrade the "
            f"driver, or {_HOW_TO_DECLARE}"
        )
    return NvmlUnavailable(f"NVML failed to initialise: {e}; {_HOW_TO_DECLARE}")


def session() -> ModuleType:
    """The ``pynvml`` module with NVML initialised (once per process; shut down at exit).

    Raises NvmlUnavailable, with what to do, when NVML cannot be used.
    """
    global _nvml
    nvml = _nvml
    if nvml is not None:
        return nvml
    with _lock:
        if _nvml is None:
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError as e:
                raise _init_error(pynvml, e) from None
            atexit.register(_shutdown)
            _nvml = pynvml
        return _nvml


def _shutdown() -> None:
    global _nvml
    with _lock:
        nvml, _nvml = _nvml, None
        if nvml is not None:
            try:
                nvml.nvmlShutdown()
            except nvml.NVMLError:
                pass  # at exit: the driver may already be gone; nothing to tell anyone


def reset() -> None:
    """Shut NVML down now; the next call initialises it again (tests, long-lived daemons)."""
    atexit.unregister(_shutdown)
    _shutdown()
    dcgm.XIDS.forget()


def driver_version() -> str | None:
    """The driver version string (e.g. "550.54.15"), or None if the driver cannot say."""
    nvml = session()
    try:
        version: str = nvml.nvmlSystemGetDriverVersion()
    except nvml.NVMLError as e:
        if e.value in _NO_VALUE:
            return None
        raise NvmlUnavailable(f"NVML cannot read the driver version: {e}") from None
    return version


def mig_parent(mig_uuid: str) -> str | None:
    """The UUID of the GPU that holds MIG device ``mig_uuid``; None if NVML knows no such MIG
    device (or cannot be used). For :func:`berth.devices.visible.restrict_to_visible`."""
    try:
        nvml = session()
    except NvmlUnavailable:
        return None
    try:
        mig = nvml.nvmlDeviceGetHandleByUUID(mig_uuid)
        parent = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)
        uuid: str = nvml.nvmlDeviceGetUUID(parent)
    except nvml.NVMLError:  # not found, not a MIG device, or no MIG support: not resolvable
        return None
    return uuid


class _Reader:
    """Reads one GPU; remembers the first hard error so the GPU is reported unhealthy."""

    __slots__ = ("error", "nvml")

    def __init__(self, nvml: ModuleType) -> None:
        self.nvml = nvml
        self.error: str | None = None

    def __call__(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self.nvml.NVMLError as e:
            if e.value not in _NO_VALUE and self.error is None:
                self.error = f"{fn.__name__}: {e}"
            return None


def count() -> int:
    """How many GPUs NVML sees."""
    nvml = session()
    try:
        n: int = nvml.nvmlDeviceGetCount()
    except nvml.NVMLError as e:
        raise NvmlUnavailable(f"NVML cannot count the GPUs: {e}") from None
    return n


def minor_numbers() -> dict[int, int | None]:
    """The minor number of each GPU's device file (``/dev/nvidiaN``: N), by NVML index; None
    where NVML cannot say. Read by the daemon that confines its jobs' devices, not by
    selection (a minor number does not change while the driver is loaded)."""
    nvml = session()
    out: dict[int, int | None] = {}
    for index in range(count()):
        read = _Reader(nvml)
        handle = read(nvml.nvmlDeviceGetHandleByIndex, index)
        out[index] = None if handle is None else read(nvml.nvmlDeviceGetMinorNumber, handle)
    return out


def read_all(
    process_details: bool = True, telemetry: bool = True, extras: bool = True
) -> list[GpuSnapshot]:
    """A snapshot of every GPU NVML sees, in NVML (PCI bus) order.

    ``telemetry=False`` skips the readings selection does not need (power, temperature and
    the extras): they are None in the snapshots. ``extras=False`` skips only the readings
    `berth status` shows in --json alone (PCI bus id, performance state, fan speed, clocks
    event reasons). What :mod:`berth.devices.telemetry` reads comes only with telemetry and
    extras, in a process that wants it."""
    details: dict[int, tuple[str | None, str | None]] | None = {} if process_details else None
    nvml = session()
    if telemetry and extras and dcgm.wanted():
        dcgm.XIDS.drain(nvml)
    return [_read_gpu(nvml, i, details, telemetry, extras) for i in range(count())]


def _read_gpu(
    nvml: ModuleType,
    index: int,
    details: dict[int, tuple[str | None, str | None]] | None,
    telemetry: bool = True,
    extras: bool = True,
) -> GpuSnapshot:
    read = _Reader(nvml)
    handle = read(nvml.nvmlDeviceGetHandleByIndex, index)
    if handle is None:
        return GpuSnapshot(
            index=index,
            uuid=f"UNKNOWN-{index}",
            name="unknown GPU",
            processes=None,
            healthy=False,
            error=read.error or "no handle for this GPU",
        )
    uuid = read(nvml.nvmlDeviceGetUUID, handle)
    name = read(nvml.nvmlDeviceGetName, handle)
    mem = _memory(nvml, read, handle)
    util = read(nvml.nvmlDeviceGetUtilizationRates, handle)
    pci = power = limit = temp = pstate = fan = reasons = None
    extra: dict[str, Any] = {}
    if telemetry:
        power, limit = _power(nvml, read, handle)
        temp = read(nvml.nvmlDeviceGetTemperature, handle, 0)  # NVML_TEMPERATURE_GPU
    if telemetry and extras:
        extra = dcgm.read(nvml, handle, index) if dcgm.wanted() else {}
        pci = read(nvml.nvmlDeviceGetPciInfo, handle)
        pstate = read(nvml.nvmlDeviceGetPerformanceState, handle)
        fan = read(nvml.nvmlDeviceGetFanSpeed, handle)
        reasons = read(_clocks_event_reasons(nvml), handle)
    compute = read(nvml.nvmlDeviceGetComputeRunningProcesses, handle)
    graphics = read(nvml.nvmlDeviceGetGraphicsRunningProcesses, handle)
    bus_id = pci.busId if pci is not None else None
    return GpuSnapshot(
        index=index,
        uuid=uuid if uuid is not None else f"UNKNOWN-{index}",
        name=name if name is not None else "unknown GPU",
        pci_bus_id=bus_id.decode() if isinstance(bus_id, bytes) else bus_id,
        memory_total=mem.total if mem is not None else None,
        memory_used=mem.used if mem is not None else None,
        memory_free=mem.free if mem is not None else None,
        memory_reserved=getattr(mem, "reserved", None),
        utilization=util.gpu if util is not None else None,
        memory_utilization=util.memory if util is not None else None,
        power_draw=power / 1000 if power is not None else None,
        power_limit=limit / 1000 if limit is not None else None,
        temperature=temp,
        performance_state=None if pstate is None or pstate == _PSTATE_UNKNOWN else pstate,
        fan_speed=fan,
        clocks_event_reasons=reasons,
        processes=_processes(compute, graphics, details),
        healthy=read.error is None,
        error=read.error,
        **extra,
    )


_memory_v2: list[bool] = []  # [whether the driver answers memory info v2], once learned


def _memory(nvml: ModuleType, read: _Reader, handle: Any) -> Any:
    """The GPU's memory: v2 where the driver has it, whose ``used`` is what nvidia-smi shows
    and leaves out what the driver reserves for itself (``reserved``); v1, whose ``used``
    counts the reserve (615 MiB of an idle H200 with driver 580, issue 37), on older drivers.
    ``free`` is the same in both. One call a GPU either way."""
    version = getattr(nvml, "nvmlMemory_v2", None)
    if version is not None and _memory_v2 != [False]:
        try:
            mem = nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
        except nvml.NVMLError as e:
            if e.value in _NO_V2:  # (an older driver: v1 from now on)
                _memory_v2[:] = [False]
            return read(nvml.nvmlDeviceGetMemoryInfo, handle)  # (or says the GPU's error)
        except TypeError:  # (an nvidia-ml-py without versions)
            _memory_v2[:] = [False]
        else:
            _memory_v2[:] = [True]
            return mem
    return read(nvml.nvmlDeviceGetMemoryInfo, handle)


def _power(nvml: ModuleType, read: _Reader, handle: Any) -> tuple[int | None, int | None]:
    """(power drawn, enforced limit) in mW, None where the driver cannot say: one
    ``nvmlDeviceGetFieldValues`` (NVML_FI_DEV_POWER_AVERAGE: what nvmlDeviceGetPowerUsage
    gives since Ampere; _POWER_CURRENT_LIMIT: the enforced limit) where the driver has them,
    each field it does not give read by its own call (older drivers and GPUs, and errors:
    the call says whether the GPU fails)."""
    try:
        values = nvml.nvmlDeviceGetFieldValues(handle, [_FI_POWER, _FI_POWER_LIMIT])
    except nvml.NVMLError:
        values = None
    power, limit = dcgm.field_values(values, 2)
    if power is None:
        power = read(nvml.nvmlDeviceGetPowerUsage, handle)
    if limit is None:
        limit = read(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
    return power, limit


def _clocks_event_reasons(nvml: ModuleType) -> Callable[..., Any]:
    """NVML's "why are the clocks not at their maximum" call: ``ClocksEventReasons`` since
    nvidia-ml-py 12.535, ``ClocksThrottleReasons`` before (same bits)."""
    fn: Callable[..., Any] | None = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    return fn or nvml.nvmlDeviceGetCurrentClocksThrottleReasons


def _processes(
    compute: list[Any] | None,
    graphics: list[Any] | None,
    details: dict[int, tuple[str | None, str | None]] | None,
) -> tuple[GpuProcess, ...] | None:
    """Compute and graphics processes merged by pid (one entry per pid, in NVML order)."""
    if compute is None and graphics is None:
        return None
    kinds: dict[int, str] = {}
    memory: dict[int, int | None] = {}
    for kind, infos in (("compute", compute or ()), ("graphics", graphics or ())):
        for info in infos:
            pid = info.pid
            if pid in kinds:
                if kind not in kinds[pid]:
                    kinds[pid] += "+" + kind
                if memory[pid] is None:
                    memory[pid] = info.usedGpuMemory
            else:
                kinds[pid] = kind
                memory[pid] = info.usedGpuMemory
    out = []
    for pid, kind in kinds.items():
        user, command = (None, None) if details is None else _details(pid, details)
        out.append(GpuProcess(pid, memory[pid], kind, user, command))
    return tuple(out)


def _details(
    pid: int, cache: dict[int, tuple[str | None, str | None]]
) -> tuple[str | None, str | None]:
    """(user name, command line) of a process, None where not visible (other PID namespace,
    another user's process under hidepid, or gone)."""
    if pid in cache:
        return cache[pid]
    # Read from /proc as psutil would (its import alone is ~13 ms of `berth status`'s start):
    # two files, each in one read; a user's name looked up once per uid.
    user: str | None = None
    command: str | None = None
    try:
        status = _read_proc(pid, "status")
        at = status.index(b"\nUid:") + 5
        user = _user(int(status[at : status.index(b"\n", at)].split()[0]))  # (the real uid)
        argv = _read_proc(pid, "cmdline").rstrip(b"\0").split(b"\0")
        command = " ".join(a.decode("utf-8", "replace") for a in argv)
        if not command:  # (a kernel thread, a zombie: its name)
            command = _read_proc(pid, "comm").strip().decode("utf-8", "replace") or None
    except (OSError, ValueError, IndexError):
        pass  # gone, or not visible (another PID namespace, hidepid)
    cache[pid] = (user, command)
    return user, command


def _read_proc(pid: int, name: str) -> bytes:
    """/proc/PID/NAME in one read (status and a command line fit in 64 KiB: longer ones cut)."""
    fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 65536)
    finally:
        os.close(fd)


_users: dict[int, str] = {}


def _user(uid: int) -> str:
    """The name of ``uid`` (its number where it has none), as `ps` and psutil name it."""
    name = _users.get(uid)
    if name is None:
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = str(uid)
        _users[uid] = name
    return name
