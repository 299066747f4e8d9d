"""berth's Python API for seeing and picking GPUs: ``berth.gpus()`` and ``berth.select(...)``.

>>> import berth
>>> for g in berth.gpus():
...     print(g.index, g.name, g.memory_free, g.utilization)
>>> ids = [g.index for g in berth.select(2, min_free="20G")]

``berth.select`` takes the same filters as ``berth select`` (keyword arguments named as its
options: :class:`berth.selection.filters.FilterArgs`) and raises
``berth.errors.NotEnoughGpus`` (its message says why each other GPU did not qualify) when
fewer GPUs qualify than asked. It only picks: to hold GPUs against others use
``berth.acquire``.
"""

from __future__ import annotations

import os

from berth import config
from berth.claims import held_by_uuid
from berth.devices import read_gpus
from berth.errors import BerthError, NotEnoughGpus

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Unpack

    from berth.config import Config
    from berth.devices.model import GpuSnapshot
    from berth.selection.choose import Claimed, Selection
    from berth.selection.filters import FilterArgs, Filters

__all__ = ["banned_reasons", "choose", "gpus", "read", "select", "selection", "visible_note"]


def _config() -> Config:
    return config.get()


def read(
    cfg: Config,
    *,
    all: bool = False,
    process_details: bool = True,
    telemetry: bool = True,
    extras: bool = True,
) -> list[GpuSnapshot]:
    """Snapshots for ``cfg``, restricted to CUDA_VISIBLE_DEVICES unless ``all`` (the readings
    as :func:`berth.devices.read_gpus` says)."""
    snaps = read_gpus(cfg, process_details=process_details, telemetry=telemetry, extras=extras)
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not all and cvd is not None:
        from berth.devices.visible import restrict_to_visible  # rare: CUDA_VISIBLE_DEVICES

        snaps = restrict_to_visible(snaps, cvd)
    return snaps


def not_mine(snaps: Sequence[GpuSnapshot]) -> list[GpuSnapshot]:
    """``snaps`` without this process among their GPU processes: a program that has already
    started CUDA (torch imported and used) and then asks berth for GPUs is not outside use of
    the GPU it asks for (its own context would keep it waiting for itself). Its memory stays
    counted: it is used. Where it is the only process NVML lists, the GPU's utilisation is its
    own kernels' too and counts as idle (on a real H200 a program that had run one kernel
    waited ~5 s for its own utilisation to fade, issue 37); beside others it stays."""
    me = os.getpid()
    out = []
    for g in snaps:
        if not g.processes or not any(p.pid == me for p in g.processes):
            out.append(g)
            continue
        others = tuple(p for p in g.processes if p.pid != me)
        if others:
            out.append(g.replace(processes=others))
            continue
        out.append(g.replace(
            processes=others,
            utilization=None if g.utilization is None else 0,
            memory_utilization=None if g.memory_utilization is None else 0,
        ))  # fmt: skip
    return out


def gpus(*, all: bool = False) -> list[GpuSnapshot]:
    """Frozen snapshots of the GPUs (NVML, or the declared inventory), in NVML order.

    Only the GPUs named by ``CUDA_VISIBLE_DEVICES`` (when it is set) unless ``all=True``, like
    gpuselect's ``gpustatus(only_cvd=True)``. Raises NvmlUnavailable without a driver (and no
    declared inventory).
    """
    return read(_config(), all=all, process_details=True)


def banned_reasons(cfg: Config, snaps: Sequence[GpuSnapshot]) -> dict[int, str]:
    """GPU index -> why the config keeps berth off it (inventory manage/ban/ban_names)."""
    out: dict[int, str] = {}
    for g in snaps:
        why = cfg.inventory.is_banned(g.index, g.uuid, g.name)
        if why is not None:
            out[g.index] = why
    return out


def held_by_berth(cfg: Config) -> Mapping[str, Claimed]:
    """What berth claims hold, by GPU uuid (:func:`berth.claims.held_by_uuid`)."""
    return held_by_uuid(cfg)


def choose(filters: Filters, *, all: bool = False, telemetry: bool = True) -> Selection:
    """Read the GPUs, the config's bans and outside-use rule and berth's claims, and choose
    against ``filters``: the whole :class:`berth.selection.choose.Selection` (chosen, rejected with
    reasons), never raising for a shortfall. ``telemetry=False`` leaves out readings no
    filter here needs (power is still read when ``max_power`` is given)."""
    from berth.selection.choose import select as _select  # not for status (~1.5 ms)
    from berth.selection.outside import OutsideRule  # not for status (imports dataclasses)

    cfg = _config()
    telemetry = telemetry or filters.max_power is not None
    snaps = not_mine(read(cfg, all=all, process_details=False, telemetry=telemetry))
    claimed, banned = held_by_berth(cfg), banned_reasons(cfg, snaps)
    return _select(snaps, filters, claimed, banned, OutsideRule.of(cfg))


def selection(
    count: int = 1,
    *,
    share: float = 1.0,
    all: bool = False,
    telemetry: bool = True,
    **filters: Unpack[FilterArgs],
) -> Selection:
    """Like :func:`select` but returns the whole :class:`berth.selection.choose.Selection` (see
    :func:`choose`) and never raises for a shortfall."""
    from berth.selection.filters import Filters  # not for status

    ask = Filters.of(count, share, "selection", **filters)
    return choose(ask, all=all, telemetry=telemetry)


def select(
    count: int = 1, *, all: bool = False, **filters: Unpack[FilterArgs]
) -> list[GpuSnapshot]:
    """Pick ``count`` GPUs that qualify; the filters are those of ``berth select``.

    ``min_free`` (and ``mem``) are bytes or a size string ("20G"); ``max_util``/``max_mem_util``
    are percentages ("auto": 0 while ``max_procs`` is 0, else no limit), ``max_power`` watts;
    ``None`` disables a filter. ``only``/``exclude``/``prefer`` take indices or UUIDs.
    ``order`` is one of random (the default), free, util, packed, index; ``seed`` makes random
    repeatable. ``predicate`` gets each GpuSnapshot and returns True to keep it;
    ``banned_names`` leaves out GPUs whose name contains one of them. Raises NotEnoughGpus
    with the reason for every GPU that does not qualify; UsageError on a bad value, TypeError
    on an unknown keyword. Only the GPUs of CUDA_VISIBLE_DEVICES unless ``all``.
    """
    from berth.selection.filters import (
        Filters,  # not for status
        for_python,  # not for status
    )

    try:
        sel = choose(Filters.of(count, 1.0, "select", **filters), all=all)
        if not sel.ok:
            note = "" if all else visible_note(read(_config(), all=True), sel.gpus)
            raise NotEnoughGpus(sel.explain_shortfall() + note, sel.rejected)
    except BerthError as e:
        e.args = (for_python(str(e.args[0])), *e.args[1:]) if e.args else e.args
        raise
    return sel.chosen


def visible_note(every: Sequence[GpuSnapshot], shown: Sequence[GpuSnapshot]) -> str:
    """"; CUDA_VISIBLE_DEVICES=... shows N of the M GPUs here (...)" when it hides some of
    ``every`` GPU (``shown``: those it shows), else "": what an impossible request is told
    about the GPUs it could not see."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None or len(shown) >= len(every):
        return ""
    ids = ", ".join(str(g.index) for g in shown) or "none"
    return (
        f"; CUDA_VISIBLE_DEVICES={cvd} shows {len(shown)} of the {len(every)} GPUs here "
        f"(GPUs shown, by NVML index: {ids}); --all considers every GPU"
    )
