"""berth's Python API for seeing and picking GPUs: ``berth.gpus()`` and ``berth.select(...)``.

>>> import berth
>>> for g in berth.gpus():
...     print(g.index, g.name, g.memory_free, g.utilization)
>>> ids = [g.index for g in berth.select(2, min_free="20G")]

``berth.select`` takes the same parameters as ``berth select`` and raises
``berth.errors.NotEnoughGpus`` (its message says why each other GPU did not qualify) when
fewer GPUs qualify than asked. It only picks: to hold GPUs against others use
``berth.acquire``.
"""

from __future__ import annotations

import os

from berth.errors import NotEnoughGpus

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Literal

    from berth.choose import Held, Selection
    from berth.config import Config
    from berth.devices.model import GpuSnapshot

__all__ = ["banned_reasons", "gpus", "read", "select", "selection"]


def _config() -> Config:
    from berth import config

    return config.get()


def read(
    cfg: Config, *, all: bool = False, process_details: bool = True, telemetry: bool = True
) -> list[GpuSnapshot]:
    """Snapshots for ``cfg``, restricted to CUDA_VISIBLE_DEVICES unless ``all``."""
    from berth.devices import read_gpus

    snaps = read_gpus(cfg, process_details=process_details, telemetry=telemetry)
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not all and cvd is not None:
        from berth.devices.visible import restrict_to_visible

        snaps = restrict_to_visible(snaps, cvd)
    return snaps


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


def held_by_berth(cfg: Config) -> Mapping[str, Held]:
    """What berth claims hold, by GPU uuid (:func:`berth.claims.held_by_uuid`)."""
    from berth.claims import held_by_uuid

    return held_by_uuid(cfg)


def selection(
    count: int = 1,
    *,
    min_free: int | str | None = None,
    max_util: float | Literal["auto"] | None = "auto",
    max_mem_util: float | Literal["auto"] | None = "auto",
    max_power: float | None = None,
    max_procs: int | None = 0,
    name: str | None = None,
    only: object = None,
    exclude: object = None,
    order: str = "random",
    prefer: object = None,
    predicate: Callable[[GpuSnapshot], bool] | None = None,
    banned_names: Sequence[str] | None = None,
    all: bool = False,
    share: float = 1.0,
    mem: int | str | None = None,
    seed: int | None = None,
    telemetry: bool = True,
) -> Selection:
    """Like :func:`select` but returns the whole :class:`berth.choose.Selection` (chosen,
    rejected with reasons) and never raises for a shortfall. Reads the GPUs, the config bans
    and berth's claims. ``telemetry=False`` leaves out readings no filter here needs (power
    is still read when ``max_power`` is given)."""
    from berth.choose import Request
    from berth.choose import select as _select
    from berth.units import parse_size

    request = Request(
        count,
        min_free=None if min_free is None else parse_size(min_free, what="--min-free"),
        max_util=max_util,
        max_mem_util=max_mem_util,
        max_power=max_power,
        max_procs=max_procs,
        name=name,
        only=only,
        exclude=exclude,
        order=order,
        prefer=prefer,
        predicate=predicate,
        banned_names=banned_names,
        share=share,
        mem=None if mem is None else parse_size(mem, what="--mem"),
        seed=seed,
    )
    cfg = _config()
    snaps = read(cfg, all=all, process_details=False, telemetry=telemetry or max_power is not None)
    request.banned.update(banned_reasons(cfg, snaps))
    return _select(snaps, request, held_by_berth(cfg))


def select(
    count: int = 1,
    *,
    min_free: int | str | None = None,
    max_util: float | Literal["auto"] | None = "auto",
    max_mem_util: float | Literal["auto"] | None = "auto",
    max_power: float | None = None,
    max_procs: int | None = 0,
    name: str | None = None,
    only: object = None,
    exclude: object = None,
    order: str = "random",
    prefer: object = None,
    predicate: Callable[[GpuSnapshot], bool] | None = None,
    banned_names: Sequence[str] | None = None,
    all: bool = False,
) -> list[GpuSnapshot]:
    """Pick ``count`` GPUs that qualify; the parameters are those of ``berth select``.

    ``min_free`` is bytes or a size string ("20G"); ``max_util``/``max_mem_util`` are
    percentages ("auto": 0 while ``max_procs`` is 0, else no limit), ``max_power`` watts;
    ``None`` disables a filter. ``only``/``exclude``/
    ``prefer`` take indices or UUIDs. ``order`` is one of random, free, util, packed, index.
    ``predicate`` gets each GpuSnapshot and returns True to keep it. Raises NotEnoughGpus
    with the reason for every GPU that does not qualify; UsageError on bad input.
    """
    sel = selection(
        count,
        min_free=min_free,
        max_util=max_util,
        max_mem_util=max_mem_util,
        max_power=max_power,
        max_procs=max_procs,
        name=name,
        only=only,
        exclude=exclude,
        order=order,
        prefer=prefer,
        predicate=predicate,
        banned_names=banned_names,
        all=all,
    )
    if not sel.ok:
        raise NotEnoughGpus(sel.explain_shortfall(), sel.rejected)
    return sel.chosen
