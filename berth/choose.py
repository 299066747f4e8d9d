"""Choosing GPUs, the pure core of ``berth select`` and ``berth.select()``: filter and rank
GPU snapshots against a request. Pure: no I/O, no clock. (Named so as not to shadow the
standard library's ``select`` nor the API function ``berth.select``.)

``select(gpus, request, held)`` returns a :class:`Selection`: the GPUs chosen, in order, and
for every GPU that does not qualify, the human reasons why (all of them, not just the first).

Filters (health, ids, bans, name, telemetry, predicate) and the rules for GPUs that berth
claims hold are in :mod:`berth.choose_filters`, which gives every reason a GPU fails.

Orders: ``random`` (gpuselect's default: random among those that qualify), ``free`` (most
free memory first), ``util`` (least utilised first), ``packed`` (fill the busiest GPU that
still qualifies: most berth share, then most processes, then most memory used), ``index``.
``prefer`` moves the listed GPUs to the front, in the order given. Ties keep index order.
"""

from __future__ import annotations

from berth.choose_reasons import reasons
from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import random
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import Literal

    from berth.devices.model import GpuSnapshot

ORDERS = ("random", "free", "util", "packed", "index")


class Held:
    """What berth claims hold on one GPU: summed share, declared memory, holders' pids."""

    __slots__ = ("memory", "pids", "share")

    share: float  # sum of shares held by berth claims; 1.0 = exclusively held
    memory: int  # bytes declared by berth claims
    pids: frozenset[int]  # pids of processes belonging to claim holders

    def __init__(self, share: float = 0.0, memory: int = 0, pids: Iterable[int] = ()) -> None:
        self.share = float(share)
        self.memory = int(memory)
        self.pids = frozenset(pids)

    def __repr__(self) -> str:
        return f"Held(share={self.share!r}, memory={self.memory!r}, pids={set(self.pids)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Held):
            return NotImplemented
        return (self.share, self.memory, self.pids) == (other.share, other.memory, other.pids)

    __hash__ = None  # type: ignore[assignment]


def _ids(value: object, option: str) -> tuple[str, ...]:
    """Normalise ids given as ``"0,2"``, ``2``, ``["0", "GPU-..."]`` into a tuple of strings."""
    if value is None:
        return ()
    items: Iterable[object]
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        items = str(value).split(",")
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = value
    else:
        raise UsageError(f"{option} {value!r}: expected GPU indices or UUIDs, e.g. 0,2")
    out: list[str] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            raise UsageError(f"{option} {item!r}: expected a GPU index or UUID")
        text = str(item).strip()
        if not text:
            continue
        if text.lstrip("-").isdigit() and int(text) < 0:
            raise UsageError(f"{option} {text}: GPU indices are 0 or more")
        out.append(text)
    return tuple(out)


def _number(value: object, option: str, *, top: float | None = None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise UsageError(f"{option} {value!r}: expected a number")
    if value < 0 or (top is not None and value > top):
        bound = f"0 to {top:g}" if top is not None else "0 or more"
        raise UsageError(f"{option} {value:g}: must be {bound}")
    return value


class Request:
    """What the caller asks for. Thresholds of ``None`` disable that filter.

    Defaults follow gpuselect: one GPU, idle (utilisation 0, memory utilisation 0, no
    processes), random among those that qualify. ``max_util``/``max_mem_util`` default to
    "auto": 0 while ``max_procs`` is 0 (idle), no limit once processes are allowed (a GPU
    that runs a process is loaded; ``--max-procs 1 --order packed`` is meant to fill it).
    """

    __slots__ = (
        "banned",
        "banned_names",
        "count",
        "exclude",
        "max_mem_util",
        "max_power",
        "max_procs",
        "max_util",
        "mem",
        "min_free",
        "name",
        "only",
        "order",
        "predicate",
        "prefer",
        "rng",
        "share",
    )

    def __init__(
        self,
        count: int = 1,
        *,
        min_free: int | None = None,
        max_util: float | Literal["auto"] | None = "auto",
        max_mem_util: float | Literal["auto"] | None = "auto",
        max_power: float | None = None,
        max_procs: int | None = 0,
        name: str | None = None,
        only: object = None,
        exclude: object = None,
        banned: Mapping[int, str] | None = None,
        banned_names: Sequence[str] | None = None,
        predicate: Callable[[GpuSnapshot], bool] | None = None,
        order: str = "random",
        prefer: object = None,
        seed: int | None = None,
        rng: random.Random | None = None,
        share: float = 1.0,
        mem: int | None = None,
    ) -> None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise UsageError(f"-n/--count {count!r}: must be a whole number of GPUs, 1 or more")
        if order not in ORDERS:
            raise UsageError(f"--order {order!r}: expected one of {', '.join(ORDERS)}")
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
            raise UsageError(f"share {share!r}: must be above 0 and at most 1 (a whole GPU)")
        if share < 1 and count != 1:
            raise UsageError(f"share {share:g} of {count} GPUs: a fractional share is of 1 GPU")
        if min_free is not None and (isinstance(min_free, bool) or min_free < 0):
            raise UsageError(f"--min-free {min_free!r}: must be a size of 0 or more")
        if mem is not None and (isinstance(mem, bool) or mem < 0):
            raise UsageError(f"--mem {mem!r}: must be a size of 0 or more")
        if max_procs is not None and (
            isinstance(max_procs, bool) or not isinstance(max_procs, int) or max_procs < 0
        ):
            raise UsageError(f"--max-procs {max_procs!r}: must be a whole number, 0 or more")
        if name is not None and not isinstance(name, str):
            raise UsageError(f"--name {name!r}: expected a string")
        if predicate is not None and not callable(predicate):
            raise UsageError(f"predicate {predicate!r} is not callable")
        self.count = count
        self.min_free = min_free
        idle = 0 if max_procs == 0 else None  # "auto": idle only when no process is allowed
        self.max_util = _number(idle if max_util == "auto" else max_util, "--max-util", top=100)
        self.max_mem_util = _number(
            idle if max_mem_util == "auto" else max_mem_util, "--max-mem-util", top=100
        )
        self.max_power = _number(max_power, "--max-power")
        self.max_procs = max_procs
        self.name = name
        self.only = _ids(only, "--only")
        self.exclude = _ids(exclude, "--exclude")
        self.prefer = _ids(prefer, "--prefer")
        self.banned = dict(banned or {})
        self.banned_names = tuple(banned_names or ())
        self.predicate = predicate
        self.order = order
        if rng is None and seed is not None:
            import random as _random

            rng = _random.Random(seed)
        self.rng = rng
        self.share = float(share)
        self.mem = mem


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


def _rank(gpu: GpuSnapshot, order: str, held: Held | None) -> tuple[float, ...]:
    """Sort key (ascending) for the deterministic orders."""
    inf = float("inf")
    if order == "free":
        return (-(gpu.memory_free if gpu.memory_free is not None else -1),)
    if order == "util":
        util = gpu.utilization if gpu.utilization is not None else inf
        used = gpu.memory_used if gpu.memory_used is not None else inf
        return (util, used)
    if order == "packed":
        share = held.share if held is not None else 0.0
        procs = len(gpu.processes) if gpu.processes else 0
        used = gpu.memory_used or 0
        util = gpu.utilization or 0
        return (-share, -procs, -used, -util)
    return ()


class Selection:
    """The outcome of :func:`select`."""

    __slots__ = ("chosen", "gpus", "qualified", "rejected", "request")

    def __init__(
        self,
        request: Request,
        gpus: Sequence[GpuSnapshot],
        qualified: list[GpuSnapshot],
        rejected: dict[int, list[str]],
    ) -> None:
        self.request = request
        self.gpus = tuple(gpus)
        self.qualified = qualified  # every GPU that qualifies, in order
        self.chosen = qualified[: request.count]  # the first `count` of them
        self.rejected = rejected  # GPU index -> reasons, for every GPU that does not qualify

    @property
    def ok(self) -> bool:
        return len(self.chosen) == self.request.count

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
        n, want = len(self.qualified), self.request.count
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
    gpus: Sequence[GpuSnapshot], request: Request, held: Mapping[str, Held] | None = None
) -> Selection:
    """Filter ``gpus`` against ``request`` and rank those that qualify.

    Raises UsageError if ``only``/``exclude``/``prefer`` name a GPU that is not in ``gpus``.
    """
    held = held or {}
    only = set(_resolve(gpus, request.only, "--only")) if request.only else None
    exclude = set(_resolve(gpus, request.exclude, "--exclude"))
    prefer = _resolve(gpus, request.prefer, "--prefer")

    qualified: list[GpuSnapshot] = []
    rejected: dict[int, list[str]] = {}
    for pos, gpu in enumerate(gpus):
        why = reasons(gpu, request, held.get(gpu.uuid), only, exclude, pos)
        if why:
            rejected[gpu.index] = why
        else:
            qualified.append(gpu)

    if request.order == "random":
        if request.rng is not None:
            request.rng.shuffle(qualified)
        else:
            import random as _random

            _random.shuffle(qualified)
    elif request.order != "index":
        qualified.sort(key=lambda g: (*_rank(g, request.order, held.get(g.uuid)), g.index))
    else:
        qualified.sort(key=lambda g: g.index)
    if prefer:
        ok = {id(g) for g in qualified}
        first = [gpus[k] for k in prefer if id(gpus[k]) in ok]
        firsts = {id(g) for g in first}
        qualified = first + [g for g in qualified if id(g) not in firsts]
    return Selection(request, gpus, qualified, rejected)
