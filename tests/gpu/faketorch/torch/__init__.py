"""A stand-in for torch, for rehearsals only: ``BERTH_FAKE_TORCH=1`` with
``bench/real_gpu.py --fake`` (or ``bash bench/real_gpu.sh --fake``) puts this directory on
PYTHONPATH, so the PyTorch branch of the script's GPU program and its torch-only checks run
against the fake NVML library (tests/fakenvml) instead of being skipped.

Only what that program and ``berth.acquire`` call: ``cuda.is_available/is_initialized/
device_count/current_device/set_device/synchronize/get_device_properties/memory_allocated/
memory_reserved/empty_cache``, ``empty``, ``zeros``. Devices are the GPUs of the fake state
that ``CUDA_VISIBLE_DEVICES`` shows (tests/fakenvml/workload.py's rules). The first CUDA call
creates a "context" of 500 MiB; allocations go through a caching allocator as PyTorch's does
(freed memory stays reserved until ``empty_cache()``); the process is registered on its
device, as the fake workload registers, with context + reserved memory, so NVML lists it as it
would list a PyTorch process.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
from types import SimpleNamespace
from typing import Any

__version__ = "0.0+rehearsal"
uint8 = "uint8"
float32 = "float32"
version = SimpleNamespace(cuda="rehearsal")

CONTEXT = 500 << 20
_WORKLOAD = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fakenvml", "workload.py"
)
_state: dict[str, Any] = {"init": False, "device": 0, "allocated": 0, "reserved": 0, "reg": None}


def _workload() -> Any:
    spec = importlib.util.spec_from_file_location("fake_workload", _WORKLOAD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _uuids() -> list[str]:
    path = os.environ.get("FAKE_NVML_STATE", "")
    try:
        with open(path) as f:
            gpus = json.load(f).get("gpus", [])
    except OSError:
        return []
    uuids: list[str] = _workload().visible_gpus(gpus, dict(os.environ))
    return uuids


def _publish() -> None:
    wl = _workload()
    state = os.environ["FAKE_NVML_STATE"]
    uuid = _uuids()[_state["device"]]
    _state["reg"] = wl.register(
        wl._procs_dir(state), [uuid], CONTEXT + _state["reserved"], 0, 0, "compute"
    )


def _unregister() -> None:
    if _state["reg"]:
        try:
            os.unlink(_state["reg"])
        except FileNotFoundError:
            pass


def _init() -> None:
    if _state["init"]:
        return
    if not _uuids():
        raise RuntimeError("No CUDA GPUs are available")
    _state["init"] = True
    atexit.register(_unregister)
    _publish()


class Tensor:
    def __init__(self, nbytes: int) -> None:
        _init()
        self.nbytes = nbytes
        _state["allocated"] += nbytes
        if _state["allocated"] > _state["reserved"]:
            _state["reserved"] = _state["allocated"]
            _publish()

    def __del__(self) -> None:
        _state["allocated"] -= self.nbytes  # stays reserved: the caching allocator keeps it


def empty(n: int, dtype: Any = None, device: Any = None) -> Tensor:
    return Tensor(int(n))


def zeros(n: int, dtype: Any = None, device: Any = None) -> Tensor:
    return Tensor(int(n) * 4)


def _empty_cache() -> None:
    _state["reserved"] = _state["allocated"]
    if _state["init"]:
        _publish()


def _set_device(index: int) -> None:
    _init()
    _state["device"] = int(index)
    _publish()


cuda = SimpleNamespace(
    is_available=lambda: bool(_uuids()),
    is_initialized=lambda: bool(_state["init"]),
    init=_init,
    device_count=lambda: len(_uuids()),
    current_device=lambda: _state["device"],
    set_device=_set_device,
    synchronize=lambda device=None: None,
    get_device_properties=lambda i: SimpleNamespace(
        name="NVIDIA H100 80GB HBM3 (rehearsal)",
        uuid=_uuids()[i].removeprefix("GPU-"),
        total_memory=80 << 30,
    ),
    memory_allocated=lambda device=None: _state["allocated"],
    memory_reserved=lambda device=None: _state["reserved"],
    empty_cache=_empty_cache,
)
