"""Qualification: every reason one GPU does not qualify for :class:`berth.selection.filters.Filters`
(none: it qualifies).

Used by :func:`berth.selection.choose.select`; pure: no I/O, no clock.

Filters (a GPU must pass all of them):

- **health**: an unhealthy GPU (``GPU_IS_LOST`` and the like) is never selected;
- **only / exclude / prefer** take indices, full UUIDs or UUID prefixes (``GPU-8e4c``); an id
  that names no GPU is a usage error, not a silent no-op;
- **banned**: the reason the caller gives for a GPU (config bans, read in the API/CLI layers),
  and banned name substrings (``banned_names``, GPU Scheduler's ``BANNED_GPU_NAMES``);
- **name**: substring of the GPU name (case-insensitive);
- **telemetry** (gpuselect's defaults: idle means utilisation 0, memory utilisation 0 and no
  processes): ``max_util``, ``max_mem_util``, ``max_procs``, ``min_free``, ``max_power``.
  ``None`` as a threshold disables that filter; utilisation and memory utilisation default
  to "auto": 0 while ``max_procs`` is 0, no limit once processes are allowed. A reading the driver does not support
  (``None``) does not fail a filter unless that filter needs it: ``--min-free`` needs a free
  memory reading and ``--max-power`` a power reading, so a GPU without one fails with
  "power n/a: --max-power needs a reading"; the idle defaults (utilisation, memory
  utilisation, process count) cannot be judged on an unknown value and let it pass;
- **predicate**: a callable (Python API only) that gets the snapshot and returns a bool.

Logical GPUs (a declared inventory: no telemetry) are selected on claims alone: the
telemetry filters do not apply to them.

Claims (berth's own ledger, read by the caller) come in as ``claimed``: a
:class:`~berth.selection.choose.Claimed` per GPU (the sum of the shares and declared memory of berth
claims on it, and the pids of the processes that belong to claim holders). The rules:

1. A GPU held exclusively (share 1.0), or whose claimed share plus ``filters.share`` exceeds
   1, or whose declared memory plus ``filters.mem`` exceeds its total memory, is taken
   ("held by berth claims: 1.0 of 1.0").
2. GPU processes whose pid is in ``claimed.pids`` are berth's own: they do not count against
   ``max_procs`` (an outside process still does).
3. When a GPU carries berth shares and the request is itself a share (``share < 1``), the
   utilisation, memory-utilisation and power filters are not applied to it: that load is the
   co-tenant's, and sharing was asked for. Outside processes are judged as usual.
4. ``filters.mem`` must also fit in the free memory reading of a GPU that carries no berth
   shares (on a shared GPU the declared memory of rule 1 is the measure instead).

The host's outside-use rule (``outside``: :class:`berth.selection.outside.OutsideRule`, the admin's
``[scheduling] outside_max_memory / outside_max_util``), when the admin set one, applies as
the daemon applies it: a GPU whose outside processes break it is unavailable for whole GPUs,
in the daemon's words, naming the rule (:func:`berth.selection.outside.unavailable`, the one function
both use). The filters still apply as asked: gpuselect's idle default (no processes) is
stricter than any rule; ``--max-procs N`` leaves the judgement of outside use to the rule.
"""

from __future__ import annotations

from berth.selection.outside import unavailable
from berth.units import format_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    from berth.devices.model import GpuSnapshot
    from berth.selection.filters import Filters
    from berth.selection.outside import OutsideRule

    class Claimed(Protocol):
        """What this module reads of a :class:`~berth.selection.choose.Claimed` (named so,
        it would import the module that imports it)."""

        @property
        def share(self) -> float: ...

        @property
        def mem(self) -> int: ...

        @property
        def pids(self) -> frozenset[int]: ...

_EPS = 1e-9


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}es"


def _pct(v: float) -> str:
    return f"{v:g}%"


def reasons(
    gpu: GpuSnapshot,
    req: Filters,
    held: Claimed | None,
    banned: str | None,
    *,
    listed: bool,
    excluded: bool,
    outside: OutsideRule | None = None,
) -> list[str]:
    """Every reason this GPU does not qualify (empty: it qualifies). ``banned``: why the
    config keeps berth off it; ``listed``: in ``--only`` (or none given); ``excluded``: in
    ``--exclude``; ``outside``: the host's outside-use rule (applied when configured)."""
    if not gpu.healthy:
        return [f"unhealthy: {gpu.error or 'unknown error'}"]
    why: list[str] = []
    if not listed:
        why.append("not in --only")
    if excluded:
        why.append("excluded")
    if banned is not None:
        why.append(banned)
    low_name = gpu.name.lower()
    for banned in req.banned_names:
        if banned and banned.lower() in low_name:
            why.append(f"name matches banned {banned!r}")
            break
    if req.name is not None and req.name.lower() not in low_name:
        why.append(f"name {gpu.name!r} does not contain {req.name!r}")

    total = gpu.memory_total
    shared = held is not None and held.share > _EPS
    if held is not None:
        if held.share >= 1 - _EPS:
            why.append("held by berth claims: 1.0 of 1.0")
        elif held.share + req.share > 1 + _EPS:
            why.append(
                f"held by berth claims: {held.share:g} of 1.0, {req.share:g} more does not fit"
            )
        if req.mem is not None and total is not None and held.mem + req.mem > total:
            why.append(
                f"berth claims declare {format_size(held.mem)} of {format_size(total)}, "
                f"{format_size(req.mem)} more does not fit"
            )
    elif req.mem is not None and total is not None and req.mem > total:
        why.append(f"total {format_size(total)} < --mem {format_size(req.mem)}")

    if not gpu.logical:
        why.extend(_telemetry(gpu, req, held, shared))
        if outside is not None and outside.configured and req.share >= 1 and gpu.processes:
            own = held.pids if held is not None else frozenset()
            procs = [p for p in gpu.processes if p.pid not in own]
            used = sum(p.used_memory or 0 for p in procs)
            said = unavailable(outside, len(procs), used, gpu.memory_total, gpu.utilization)
            if said is not None:
                why.append(said)
    if req.predicate is not None and not why and not req.predicate(gpu):
        why.append("rejected by predicate")
    return why


def _telemetry(gpu: GpuSnapshot, req: Filters, held: Claimed | None, shared: bool) -> list[str]:
    why: list[str] = []
    co_tenant = shared and req.share < 1  # rule 3: the load is the co-tenant's
    if not co_tenant:
        if req.max_util is not None and gpu.utilization is not None:
            if gpu.utilization > req.max_util:
                why.append(f"utilisation {_pct(gpu.utilization)} > {_pct(req.max_util)}")
        if req.max_mem_util is not None and gpu.memory_utilization is not None:
            if gpu.memory_utilization > req.max_mem_util:
                why.append(
                    f"memory utilisation {_pct(gpu.memory_utilization)} > {_pct(req.max_mem_util)}"
                )
        if req.max_power is not None:
            if gpu.power_draw is None:
                why.append("power n/a: --max-power needs a reading")
            elif gpu.power_draw > req.max_power:
                why.append(f"power {gpu.power_draw:g}W > {req.max_power:g}W")
    if req.max_procs is not None and gpu.processes is not None:
        own = held.pids if held is not None else frozenset()
        outside = sum(1 for p in gpu.processes if p.pid not in own)
        if outside > req.max_procs:
            why.append(f"{_plural(outside, 'process')} > {req.max_procs}")
    need = req.min_free
    too_big = req.mem is not None and gpu.memory_total is not None and req.mem > gpu.memory_total
    if req.mem is not None and not shared and not too_big:
        need = req.mem if need is None else max(need, req.mem)  # rule 4
    if need is not None:
        if gpu.memory_free is None:
            why.append("free memory n/a: --min-free needs a reading")
        elif gpu.memory_free < need:
            why.append(f"free {format_size(gpu.memory_free)} < {format_size(need)}")
    return why
