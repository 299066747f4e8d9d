"""Drop-in replacement for the ``gpuselect`` package: change one import line.

>>> from berth.compat.gpuselect import gpuselect   # was: from gpuselect import gpuselect
>>> gpuselect()                # one idle GPU; CUDA_VISIBLE_DEVICES is now e.g. "1"
>>> gpuselect(count=2, name="A6000")
>>> gpuselect(util=10, processes=1)
>>> gpuselect(devices=[0, 1])
>>> gpuselect(count=4, silent=True) == ""   # True when 4 GPUs do not qualify

Same parameters, defaults and results as gpuselect: idle means utilisation 0, memory
utilisation 0 and no processes; a random choice among those that qualify; the chosen ids
are written to ``CUDA_VISIBLE_DEVICES`` (and ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, so CUDA numbers
the GPUs as NVML does) and returned as a string. ``selector`` gets a :class:`GpuInfo` and
replaces the other filters. Decisions are logged at DEBUG on the ``gpuselect`` logger.

Where berth is stricter: GPUs banned in berth's config, held by berth claims or unhealthy
are never chosen; an unsupported reading is ``None`` rather than a crash; a failure raises
``berth.errors.NotEnoughGpus`` (an ``Exception``) whose message says why each GPU did not
qualify. Picking does not hold a GPU against others: use ``berth.acquire`` for that.
"""

from __future__ import annotations

import logging
import os
from typing import NamedTuple

from berth import api
from berth.errors import NotEnoughGpus, UsageError
from berth.selection.choose import select
from berth.selection.filters import Filters

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from berth.devices.model import GpuSnapshot

__all__ = ["GpuInfo", "gpuselect", "gpustatus"]

logger = logging.getLogger("gpuselect")


class GpuInfo(NamedTuple):
    """What a ``selector`` sees of a GPU: gpuselect 0.1.4's fourteen fields, by the same
    names (``effective_power_limt`` spelled as it spells it) in the same order, so a selector
    written for gpuselect, by name or by position, reads the same values here. None where the
    driver cannot say (gpuselect raised instead)."""

    device: int  # NVML index (PCI bus order)
    name: str
    util: int | None  # utilisation %
    mem_util: int | None  # memory-bandwidth utilisation %
    mem_free: int | None  # bytes
    mem_used: int | None  # bytes
    mem_total: int | None  # bytes
    processes: int | None  # number of processes on the GPU
    fan_speed: int | None  # % of the fan's maximum
    effective_power_limt: int | None  # milliwatts (NVML's enforced power limit)
    performance_state: int | None  # 0 (max) .. 15 (min)
    power_usage: int | None  # milliwatts
    temperature: int | None  # degrees C
    is_throttling: int | None  # 1 if something other than idleness holds the clocks down


# NVML's clock event reasons that are not throttling: the GPU is idle, the applications'
# clocks or the display's clock setting asked for lower clocks. (gpuselect 0.1.4 read
# "no reason at all", full clocks, as throttling; berth does not.)
_NOT_THROTTLING = 0x1 | 0x2 | 0x100


def _throttling(reasons: int | None) -> int | None:
    return None if reasons is None else int(bool(reasons & ~_NOT_THROTTLING))


def _milliwatts(watts: float | None) -> int | None:
    return None if watts is None else round(watts * 1000)


def _info(g: GpuSnapshot) -> GpuInfo:
    return GpuInfo(
        device=g.index,
        name=g.name,
        util=g.utilization,
        mem_util=g.memory_utilization,
        mem_free=g.memory_free,
        mem_used=g.memory_used,
        mem_total=g.memory_total,
        processes=g.process_count,
        fan_speed=g.fan_speed,
        effective_power_limt=_milliwatts(g.power_limit),
        performance_state=g.performance_state,
        power_usage=_milliwatts(g.power_draw),
        temperature=g.temperature,
        is_throttling=_throttling(g.clocks_event_reasons),
    )


def gpustatus(only_cvd: bool = True) -> list[dict[str, object]]:
    """One dict per GPU: device, name, utilization, mem_utilization, processes,
    performance_state, power_usage (milliwatts), temperature (None where unsupported).

    ``only_cvd=True`` reports only the GPUs in ``CUDA_VISIBLE_DEVICES`` (when it is set).
    """
    out: list[dict[str, object]] = []
    for g in api.read(api._config(), all=not only_cvd, process_details=False):
        out.append(
            {
                "device": g.index,
                "name": g.name,
                "utilization": g.utilization,
                "mem_utilization": g.memory_utilization,
                "processes": g.process_count,
                "performance_state": g.performance_state,
                "power_usage": _milliwatts(g.power_draw),
                "temperature": g.temperature,
            }
        )
    return out


def gpuselect(
    count: int = 1,
    devices: int | list[int] | None = None,
    name: str | None = None,
    util: int = 0,
    mem_util: int = 0,
    processes: int = 0,
    selector: Callable[[GpuInfo], bool] | None = None,
    silent: bool = False,
    set_cvd: bool = True,
) -> str:
    """Pick ``count`` idle GPUs, set ``CUDA_VISIBLE_DEVICES`` to them and return its value.

    ``devices`` (an id or a list) and ``name`` (a substring) are mutually exclusive; ``util``,
    ``mem_util`` and ``processes`` are the maximum utilisation %, memory utilisation % and
    process count; ``selector`` overrides those filters. On a shortfall raises NotEnoughGpus,
    or returns "" if ``silent``.
    """
    logger.debug(
        "count=%s,devices=%s,name=%s,util=%s,mem_util=%s,processes=%s,silent=%s",
        count, devices, name, util, mem_util, processes, silent,
    )  # fmt: skip
    ids, count = _checked(count, devices, name, util, mem_util, processes)
    cfg = api._config()
    snaps = api.not_mine(api.read(cfg, all=True, process_details=False))
    logger.debug("GPU count: %s", len(snaps))
    known = {g.index for g in snaps}
    for d in ids:
        if d not in known:
            raise UsageError(f"Invalid device ID {d}: GPUs here are 0-{len(snaps) - 1}")

    asked = _filters(count, ids, name, util, mem_util, processes, selector)
    sel = select(snaps, asked, api.held_by_berth(cfg), api.banned_reasons(cfg, snaps))
    for g in snaps:
        why = sel.rejected.get(g.index)
        logger.debug("Device %s (%s): %s", g.index, g.name, "; ".join(why) if why else "qualifies")
    logger.debug("GPUs left after filtering (%s requested): %s", count, len(sel.qualified))

    if not sel.ok:
        msg = f"Requested {count} GPUs, but {len(sel.qualified)} matched filters: "
        msg += sel.explain_shortfall()
        logger.debug(msg)
        if silent:
            return ""
        raise NotEnoughGpus(msg, sel.rejected)

    cuda_visible_devices = ",".join(str(i) for i in sel.ids)
    if set_cvd:
        os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        os.environ["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices
    logger.debug("CUDA_VISIBLE_DEVICES=%s", cuda_visible_devices)
    return cuda_visible_devices


def _checked(
    count: int, devices: int | list[int] | None, name: str | None, util: int, mem_util: int,
    processes: int,
) -> tuple[list[int], int]:  # fmt: skip
    """The device ids asked for, and the count (raised to their number): UsageError for
    arguments gpuselect refuses."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise UsageError(f"GPU count must be >= 1, got {count!r}")
    ids: list[int] = (
        [] if devices is None else [devices] if isinstance(devices, int) else list(devices)
    )
    if ids and name is not None:
        raise UsageError("Use only one of 'devices' and 'name' parameters")
    if util < 0 or mem_util < 0 or processes < 0:
        raise UsageError(
            f"Utilization/process count thresholds must be >= 0, got util={util}, "
            f"mem_util={mem_util}, processes={processes}"
        )
    if len(ids) > count:
        logger.warning(
            "count=%s but %s device IDs were specified, setting count=%s", count, len(ids), len(ids)
        )
        count = len(ids)
    return ids, count


def _filters(
    count: int, ids: list[int], name: str | None, util: int, mem_util: int, processes: int,
    selector: Callable[[GpuInfo], bool] | None,
) -> Filters:  # fmt: skip
    """gpuselect's arguments as berth's Filters (``selector`` replaces the thresholds)."""
    if selector is not None:
        user_selector = selector

        def predicate(g: GpuSnapshot) -> bool:
            return bool(user_selector(_info(g)))

        return Filters(
            count, max_util=None, max_mem_util=None, max_procs=None, predicate=predicate
        )
    return Filters(
        count,
        max_util=util,
        max_mem_util=mem_util,
        max_procs=processes,
        name=name,  # a substring, as gpuselect (but case-insensitive)
        only=tuple(str(d) for d in ids),
    )
