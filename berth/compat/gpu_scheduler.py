"""Drop-in replacement for GPU Scheduler's ``gpu_scheduler`` package: change one import line.

>>> from berth.compat.gpu_scheduler import get_gpu_info, find_free_gpus
>>> for gpu in get_gpu_info():
...     print(f"GPU {gpu['gpu_id']}: {gpu['name']}")
...     print(f"  Memory: {gpu['memory_free']}MB free / {gpu['memory_total']}MB total")
...     print(f"  Power: {gpu['power_draw']}W / {gpu['power_limit']}W")
...     print(f"  Utilization: {gpu['utilization']}%")
>>> free_gpus = find_free_gpus(
...     memory_free_threshold_gb=20, power_threshold_w=50, utilization_threshold_percent=1
... )

Same names, parameters and returned keys as gpu_scheduler's utility functions. ``gpu_id`` is
the PyTorch index: the position among the GPUs in ``CUDA_VISIBLE_DEVICES`` (all GPUs when it
is unset), in PCI bus order (set ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so PyTorch agrees). Memory
is in MB (MiB), power in W, utilisation in %; a reading the driver does not support is 0, as
in gpu_scheduler.

``BANNED_GPUS`` (gpu ids) and ``BANNED_GPU_NAMES`` (name substrings) are honoured, and so are
the bans of berth's config. Where berth is stricter: GPUs held by berth claims (any process,
any user, with or without a daemon) and unhealthy GPUs are never "free"; without a driver the
functions raise ``berth.errors.NvmlUnavailable`` instead of returning an empty list.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import math
import os
import sys

from berth import api
from berth.api.lease import claim, cuda_initialized
from berth.devices.visible import restrict_to_visible
from berth.errors import UsageError
from berth.selection.choose import select
from berth.selection.filters import Filters

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from berth.config import Config
    from berth.devices.model import GpuSnapshot
    from berth.selection.choose import Selection

__all__ = [
    "BANNED_GPUS",
    "BANNED_GPU_NAMES",
    "find_free_gpus",
    "get_gpu_info",
    "get_gpu_memory_usage",
    "get_gpu_names",
    "get_gpu_power_usage",
    "get_gpu_utilization",
    "get_total_num_gpus",
]

logger = logging.getLogger("gpu_scheduler")

# GPU ids (PyTorch order) that should never be used, e.g. reserved for other tasks.
BANNED_GPUS: list[int] = []
# GPU name substrings that should never be used, e.g. ["Quadro RTX 6000"].
BANNED_GPU_NAMES: list[str] = []

_MB = 1024 * 1024


def _visible() -> tuple[Config, list[GpuSnapshot]]:
    """The config and the GPUs PyTorch would see, in PyTorch (= PCI bus) order."""
    cfg = api._config()
    return cfg, api.read(cfg, all=False, process_details=False)


def _mb(n: int | None) -> int:
    return 0 if n is None else n // _MB


def _memory(gpu_id: int, g: GpuSnapshot) -> dict[str, Any]:
    return {
        "gpu_id": gpu_id,
        "memory_used": _mb(g.memory_used),
        "memory_total": _mb(g.memory_total),
        "memory_free": _mb(g.memory_free),
    }


def _power(gpu_id: int, g: GpuSnapshot) -> dict[str, Any]:
    return {
        "gpu_id": gpu_id,
        "power_draw": float(g.power_draw or 0.0),
        "power_limit": float(g.power_limit or 0.0),
    }


def _utilization(gpu_id: int, g: GpuSnapshot) -> dict[str, Any]:
    return {"gpu_id": gpu_id, "utilization": g.utilization or 0}


def _info(gpu_id: int, g: GpuSnapshot) -> dict[str, Any]:
    info = _memory(gpu_id, g)
    info.update(_power(gpu_id, g))
    info.update(_utilization(gpu_id, g))
    info["name"] = g.name
    return info


def get_gpu_memory_usage() -> list[dict[str, Any]]:
    """[{gpu_id, memory_used, memory_total, memory_free}] in MB, one per GPU."""
    return [_memory(k, g) for k, g in enumerate(_visible()[1])]


def get_gpu_names() -> list[dict[str, Any]]:
    """[{gpu_id, name}], one per GPU."""
    return [{"gpu_id": k, "name": g.name} for k, g in enumerate(_visible()[1])]


def get_gpu_power_usage() -> list[dict[str, Any]]:
    """[{gpu_id, power_draw, power_limit}] in W (0.0 where unsupported), one per GPU."""
    return [_power(k, g) for k, g in enumerate(_visible()[1])]


def get_gpu_utilization() -> list[dict[str, Any]]:
    """[{gpu_id, utilization}] in % (0 where unsupported), one per GPU."""
    return [_utilization(k, g) for k, g in enumerate(_visible()[1])]


def get_gpu_info() -> list[dict[str, Any]]:
    """Everything at once (one consistent read): gpu_id, memory_used, memory_total,
    memory_free (MB), power_draw, power_limit (W), utilization (%), name."""
    return [_info(k, g) for k, g in enumerate(_visible()[1])]


def get_total_num_gpus() -> int:
    """How many GPUs PyTorch would see."""
    return len(_visible()[1])


def _ask(
    cfg: Config,
    snaps: list[GpuSnapshot],
    count: int,
    specific_gpus: list[int] | None,
    thresholds: tuple[float | None, float | None, float | None] | None,
) -> tuple[Filters, dict[int, str]]:
    """gpu_scheduler's rules as berth filters, and the GPUs banned (config, BANNED_GPUS).
    ``thresholds``: (free memory GB, power W, utilisation %), or None to check none of them;
    0 GB, None W and 100 % or more each turn one off."""
    only: tuple[str, ...] = ()
    if specific_gpus is not None:
        for k in specific_gpus:
            if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(snaps):
                raise UsageError(f"specific_gpus has {k!r}: GPU ids here are 0 to {len(snaps) - 1}")
        only = tuple(str(snaps[k].index) for k in specific_gpus)
    gb, power, util = thresholds or (None, None, None)
    asked = Filters(
        count,
        min_free=int(gb * 1024 * _MB) if gb and gb > 0 else None,
        max_util=util if util is not None and util < 100 else None,
        max_mem_util=None,
        max_power=power,
        max_procs=None,
        only=only,
        banned_names=tuple(BANNED_GPU_NAMES),
        order="index",
    )
    banned = api.banned_reasons(cfg, snaps)
    for k, g in enumerate(snaps):
        if k in BANNED_GPUS:
            banned[g.index] = f"GPU {k} is in BANNED_GPUS"
    return asked, banned


def find_free_gpus(
    memory_free_threshold_gb: float = 1,
    power_threshold_w: float | None = None,
    utilization_threshold_percent: float = 1,
    specific_gpus: list[int] | None = None,
) -> list[dict[str, Any]]:
    """GPUs with at least ``memory_free_threshold_gb`` GB free (0: any), drawing at most
    ``power_threshold_w`` W (None: any) and at most ``utilization_threshold_percent`` %
    utilised (100 or more: any), among ``specific_gpus`` if given; not banned, not held by
    berth claims, healthy. Returns their get_gpu_info() dicts in gpu_id order (just
    ``{"gpu_id": ...}`` when every threshold is off, as gpu_scheduler does).
    """
    cfg, snaps = _visible()
    position = {g.index: k for k, g in enumerate(snaps)}
    check_all = not (
        memory_free_threshold_gb == 0
        and power_threshold_w is None
        and utilization_threshold_percent >= 100
    )
    thresholds = (memory_free_threshold_gb, power_threshold_w, utilization_threshold_percent)
    asked, banned = _ask(
        cfg, snaps, max(1, len(snaps)), specific_gpus, thresholds if check_all else None
    )
    sel = select(snaps, asked, api.held_by_berth(cfg), banned)
    for index, why in sorted(sel.rejected.items()):
        logger.debug("Skipping GPU %s: %s", position[index], "; ".join(why))
    if not check_all:
        return [{"gpu_id": position[g.index]} for g in sel.qualified]
    return [_info(position[g.index], g) for g in sel.qualified]


# --- GPUScheduler ------------------------------------------------------------------------
# The context manager of GPU Scheduler (``with GPUScheduler(num_gpus=2) as gpu_ids:``) belongs
# with berth's claims and is defined below this line by the claims work, on top of
# find_free_gpus' rules and berth.acquire.


class GPUScheduler:
    """GPU Scheduler's context manager on berth's claims: ``with GPUScheduler() as gpu_ids:``.

    Waits (fairly, woken at once when another berth holder lets go) until ``num_gpus`` GPUs
    pass the health checks (``find_free_gpus``' rules: free memory, power, utilisation, not
    banned) and are not claimed by anyone on the host, claims them, and yields their ids
    (PyTorch indices: the NVML index when CUDA_VISIBLE_DEVICES is unset), so GPU Scheduler's
    ``f"cuda:{gpu_ids[0]}"`` names the claimed GPU. All GPUs stay visible (as in GPU Scheduler);
    CUDA_DEVICE_ORDER=PCI_BUS_ID is set while CUDA is not initialised, so PyTorch numbers
    GPUs as NVML does, and when torch is installed ``torch.cuda.set_device(gpu_ids[0])`` makes
    the claimed GPU the default device. The claim ends when the block exits or the process
    dies (even ``kill -9``): no lock files to clean up.

    While it waits it says once why (a warning of the ``gpu_scheduler`` logger: each GPU's
    reason, as ``berth select --explain`` gives it, e.g. "power 61W > 50W").
    ``debug_mode`` bypasses the health checks, never the claims. ``poll_interval`` only paces
    re-reading the GPUs for changes made outside berth. ``max_wait_time`` (seconds) raises
    ``berth.errors.WaitTimeout`` (a TimeoutError) when exceeded. ``timeout`` (GPU Scheduler's
    lock-file timeout) is accepted for compatibility: berth's ledger takes no lock that
    anybody could make it wait for.
    """

    def __init__(
        self,
        memory_free_threshold_gb: float = 20,
        power_threshold_w: float | None = 80,
        utilization_threshold_percent: float = 1,
        max_wait_time: float = float("inf"),
        poll_interval: float = 10,
        specific_gpus: list[int] | None = None,
        timeout: float = 10,
        num_gpus: int = 1,
        debug_mode: bool = False,
    ) -> None:
        self.memory_free_threshold_gb = memory_free_threshold_gb
        self.power_threshold_w = power_threshold_w
        self.utilization_threshold_percent = utilization_threshold_percent
        self.max_wait_time = max_wait_time
        self.poll_interval = poll_interval
        self.specific_gpus = specific_gpus
        self.timeout = timeout
        self.num_gpus = num_gpus
        self.debug_mode = debug_mode
        self.gpu_ids: list[int] = []
        self._lease: Any = None
        self._saved_order: str | None = None
        self._set_order = False

    def __enter__(self) -> list[int]:
        cfg, snaps = _visible()
        thresholds = (
            self.memory_free_threshold_gb,
            self.power_threshold_w,
            self.utilization_threshold_percent,
        )
        asked, banned = _ask(
            cfg, snaps, self.num_gpus, self.specific_gpus, None if self.debug_mode else thresholds
        )
        wait = self.max_wait_time
        timeout = None if wait is None or math.isinf(wait) else float(wait)
        lease, now = claim(
            asked, timeout=timeout, poll=float(self.poll_interval), label="GPUScheduler",
            banned=banned, on_wait=self._said_why(),
        )  # fmt: skip
        self._lease = lease
        visible = restrict_to_visible(now, os.environ.get("CUDA_VISIBLE_DEVICES"))
        position = {g.uuid: k for k, g in enumerate(visible)}
        self.gpu_ids = [position[u] for u in lease.uuids]
        if not cuda_initialized():
            self._saved_order = os.environ.get("CUDA_DEVICE_ORDER")
            os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
            self._set_order = True
        self._set_torch_device()
        logger.info("Acquired GPUs %s", self.gpu_ids)
        return list(self.gpu_ids)

    def _said_why(self) -> Callable[[int, Selection, Any], None]:
        """What waiting calls each time no GPU set qualifies: says once (a warning of the
        ``gpu_scheduler`` logger, on stderr unless logging is set up otherwise) why it
        waits, each GPU's reason as ``berth select --explain`` gives it, with the thresholds
        by their parameter names. GPU Scheduler said nothing and waited."""
        said: list[bool] = []

        def why(position: int, sel: Selection, state: Any) -> None:
            if said:
                return
            said.append(True)
            checks = (
                "none: debug_mode=True" if self.debug_mode else
                f"memory_free_threshold_gb={self.memory_free_threshold_gb:g}, "
                f"power_threshold_w={self.power_threshold_w}, "
                f"utilization_threshold_percent={self.utilization_threshold_percent:g}"
            )  # fmt: skip
            ahead = f"; {position} waiting ahead" if position else ""
            logger.warning(
                "GPUScheduler: waiting for %d GPU(s) (checks: %s; max_wait_time=%s)%s: %s",
                self.num_gpus, checks, f"{self.max_wait_time:g}", ahead,
                sel.explain_shortfall(),
            )  # fmt: skip

        return why

    def _set_torch_device(self) -> None:
        torch: Any = sys.modules.get("torch")
        if torch is None:
            if importlib.util.find_spec("torch") is None:
                return
            torch = importlib.import_module("torch")
        try:
            if torch.cuda.is_available():
                torch.cuda.set_device(self.gpu_ids[0])
        except Exception as e:  # torch without CUDA, or a broken install: GPU Scheduler went on
            logger.warning("could not set the default CUDA device: %s", e)

    def __exit__(self, *exc: object) -> None:
        if self._lease is not None:
            self._lease.release()
            self._lease = None
        if self._set_order:
            if self._saved_order is None:
                os.environ.pop("CUDA_DEVICE_ORDER", None)
            else:
                os.environ["CUDA_DEVICE_ORDER"] = self._saved_order
            self._set_order = False
        logger.info("Released GPUs %s", self.gpu_ids)


__all__.append("GPUScheduler")
