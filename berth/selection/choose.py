"""Choosing GPUs, the pure core of ``berth select`` and ``berth.select()``: filter and rank
GPU snapshots against what a caller asks (:class:`berth.selection.filters.Filters`). Pure: no I/O, no
clock. (Named so as not to shadow the standard library's ``select`` nor the API function
``berth.select``.)

``select(gpus, filters, claimed, banned)`` returns a :class:`Selection`: the GPUs chosen, in
order, and for every GPU that does not qualify, the human reasons why (all of them, not just
the first). ``claimed`` says what berth claims hold on each GPU (:class:`Claimed`, by uuid),
``banned`` why the config keeps berth off a GPU (by index): facts of the host, not of the ask.

The filters (health, ids, bans, name, telemetry, predicate) and the rules for GPUs that berth
claims hold are in :mod:`berth.selection.reasons`, which gives every reason a GPU fails.

Orders: ``random`` (gpuselect's default: random among those that qualify), ``free`` (most
free memory first), ``util`` (least utilised first), ``packed`` (fill the busiest GPU that
still qualifies: most berth share, then most processes, then most memory used), ``index``.
``prefer`` moves the listed GPUs to the front, in the order given. Ties keep index order.
"""

from __future__ import annotations

from berth.errors import UsageError
from berth.record import Record, field, record
from berth.selection.reasons import reasons

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from berth.devices.model import GpuSnapshot
    from berth.selection.filters import Filters
    from berth.selection.outside import OutsideRule


@record
class Claimed(Record):
    """What berth claims hold on one GPU, as a process choosing GPUs sees them: the summed
    ``share`` (1.0 = held whole), the ``mem`` they declare (bytes) and the ``pids`` of the
    processes that belong to their holders (those are no outside processes). Older waiters'
    reservations come in the same form: they count like claims.

    The scheduler's :class:`berth.core.inventory.Usage` says the same of others' claims in the
    same words (``share``, ``mem``), after judging the GPU's processes itself (``busy``,
    ``label``) instead of carrying ``pids``. (Neither ``claims``, which makes these, nor the
    CLI's path imports ``core``.)"""

    share: float = field(default=0.0, check=lambda v, _: float(v))
    mem: int = field(default=0, check=lambda v, _: int(v))
    pids: frozenset[int] = field(default=frozenset(), check=lambda v, _: frozenset(v))


def matches(gpu: GpuSnapshot, ident: str) -> bool:
    """Does ``ident`` (an index, a full UUID or a UUID prefix) name this GPU?"""
    if ident.isdigit():
        return int(ident) == gpu.index
    low = ident.lower()
    uuid = gpu.uuid.lower()
    if uuid == low:
        return True
    # CUDA accepts unique UUID prefixes, with or without the "GPU-" part.
    if not low.startswith("gpu-") and not low.startswith("mig-"):
        low = "gpu-" + low
    return len(low) > 4 and uuid.startswith(low)


def _resolve(gpus: Sequence[GpuSnapshot], ids: tuple[str, ...], option: str) -> list[int]:
    """Positions (in ``gpus``) named by ``ids``, in the order given; a usage error if one
    names no GPU or (a UUID prefix) several."""
    out: list[int] = []
    for ident in ids:
        hits = [k for k, g in enumerate(gpus) if matches(g, ident)]
        if not hits:
            have = ", ".join(str(g.index) for g in gpus) or "none"
            raise UsageError(f"{option} {ident}: no such GPU here (GPUs: {have})")
        if len(hits) > 1:
            raise UsageError(f"{option} {ident}: ambiguous UUID prefix, matches several GPUs")
        if hits[0] not in out:
            out.append(hits[0])
    return out


def _rank(gpu: GpuSnapshot, order: str, claimed: Claimed | None) -> tuple[float, ...]:
    """Sort key (ascending) for the deterministic orders."""
    inf = float("inf")
    if order == "free":
        return (-(gpu.memory_free if gpu.memory_free is not None else -1),)
    if order == "util":
        util = gpu.utilization if gpu.utilization is not None else inf
        used = gpu.memory_used if gpu.memory_used is not None else inf
        return (util, used)
    if order == "packed":
        share = claimed.share if claimed is not None else 0.0
        procs = len(gpu.processes) if gpu.processes else 0
        used = gpu.memory_used or 0
        util = gpu.utilization or 0
        return (-share, -procs, -used, -util)
    return ()


class Selection:
    """The outcome of :func:`select`."""

    __slots__ = ("chosen", "filters", "gpus", "qualified", "rejected")

    def __init__(
        self,
        filters: Filters,
        gpus: Sequence[GpuSnapshot],
        qualified: list[GpuSnapshot],
        rejected: dict[int, list[str]],
    ) -> None:
        self.filters = filters
        self.gpus = tuple(gpus)
        self.qualified = qualified  # every GPU that qualifies, in order
        self.chosen = qualified[: filters.count]  # the first `count` of them
        self.rejected = rejected  # GPU index -> reasons, for every GPU that does not qualify

    @property
    def ok(self) -> bool:
        return len(self.chosen) == self.filters.count

    @property
    def ids(self) -> list[int]:
        return [g.index for g in self.chosen]

    @property
    def uuids(self) -> list[str]:
        return [g.uuid for g in self.chosen]

    def explain(self) -> list[str]:
        """One line per GPU: chosen, qualifies, or why not."""
        chosen = {g.index for g in self.chosen}
        lines = []
        for g in self.gpus:
            if g.index in chosen:
                lines.append(f"GPU {g.index}: chosen")
            elif g.index in self.rejected:
                lines.append(f"GPU {g.index}: " + "; ".join(self.rejected[g.index]))
            else:
                lines.append(f"GPU {g.index}: qualifies (not needed)")
        return lines

    def explain_shortfall(self) -> str:
        """One line: how many qualify of how many asked, and why each other GPU does not."""
        n, want = len(self.qualified), self.filters.count
        if not self.gpus:
            return f"no GPUs to choose from ({want} requested)"
        word = "GPU qualifies" if n == 1 else "GPUs qualify"
        head = f"only {n} of {want} {word}" if n else f"no GPU qualifies ({want} requested)"
        if want > len(self.gpus):
            head += f" (there are {len(self.gpus)} GPUs)"
        parts = [f"GPU {i}: {', '.join(r)}" for i, r in sorted(self.rejected.items())]
        return head + (": " + "; ".join(parts) if parts else "")

    def __repr__(self) -> str:
        return f"Selection(chosen={self.ids}, rejected={self.rejected})"


def select(
    gpus: Sequence[GpuSnapshot],
    filters: Filters,
    claimed: Mapping[str, Claimed] | None = None,
    banned: Mapping[int, str] | None = None,
    outside: OutsideRule | None = None,
) -> Selection:
    """Filter ``gpus`` against ``filters`` and rank those that qualify. ``claimed``: GPU uuid
    -> what berth claims hold there; ``banned``: GPU index -> why the config keeps berth off;
    ``outside``: the host's outside-use rule (:mod:`berth.selection.outside`), as the daemon applies it.

    Raises UsageError if ``only``/``exclude``/``prefer`` name a GPU that is not in ``gpus``.
    """
    claimed = claimed or {}
    banned = banned or {}
    only = set(_resolve(gpus, filters.only, "--only")) if filters.only else None
    exclude = set(_resolve(gpus, filters.exclude, "--exclude"))
    prefer = _resolve(gpus, filters.prefer, "--prefer")

    qualified: list[GpuSnapshot] = []
    rejected: dict[int, list[str]] = {}
    for pos, gpu in enumerate(gpus):
        why = reasons(
            gpu, filters, claimed.get(gpu.uuid), banned.get(gpu.index),
            listed=only is None or pos in only, excluded=pos in exclude, outside=outside,
        )  # fmt: skip
        if why:
            rejected[gpu.index] = why
        else:
            qualified.append(gpu)

    if filters.order == "random":
        if filters.seed is not None:
            filters.seed.shuffle(qualified)
        else:
            import random as _random  # rare: --order random

            _random.shuffle(qualified)
    elif filters.order != "index":
        qualified.sort(key=lambda g: (*_rank(g, filters.order, claimed.get(g.uuid)), g.index))
    else:
        qualified.sort(key=lambda g: g.index)
    if prefer:
        ok = {id(g) for g in qualified}
        first = [gpus[k] for k in prefer if id(gpus[k]) in ok]
        firsts = {id(g) for g in first}
        qualified = first + [g for g in qualified if id(g) not in firsts]
    return Selection(filters, gpus, qualified, rejected)
