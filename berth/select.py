"""Selection: filter and rank GPU snapshots against a request. Pure: no I/O, no clock.

``select(gpus, request, held)`` returns a :class:`Selection`: the GPUs chosen, in order, and
for every GPU that does not qualify, the human reasons why (all of them, not just the first).

Filters (a GPU must pass all of them):

- **health**: an unhealthy GPU (``GPU_IS_LOST`` and the like) is never selected;
- **only / exclude / prefer** take indices, full UUIDs or UUID prefixes (``GPU-8e4c``); an id
  that names no GPU is a usage error, not a silent no-op;
- **banned**: reasons given by the caller per index (config bans, applied in the API/CLI
  layers), and banned name substrings (``banned_names``, seed 000's ``BANNED_GPU_NAMES``);
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

Claims (berth's own ledger, read by the caller) come in as ``held``: a mapping from GPU uuid
to :class:`Held` (the sum of the shares and declared memory of berth claims on that GPU, and
the pids of the processes that belong to claim holders). The rules:

1. A GPU held exclusively (share 1.0), or whose held share plus ``request.share`` exceeds 1,
   or whose declared memory plus ``request.mem`` exceeds its total memory, is taken
   ("held by berth claims: 1.0 of 1.0").
2. GPU processes whose pid is in ``held.pids`` are berth's own: they do not count against
   ``max_procs`` (an outside process still does).
3. When a GPU carries berth shares and the request is itself a share (``share < 1``), the
   utilisation, memory-utilisation and power filters are not applied to it: that load is the
   co-tenant's, and sharing was asked for. Outside processes are judged as usual.
4. ``request.mem`` must also fit in the free memory reading of a GPU that carries no berth
   shares (on a shared GPU the declared memory of rule 1 is the measure instead).

Orders: ``random`` (gpuselect's default: random among those that qualify), ``free`` (most
free memory first), ``util`` (least utilised first), ``packed`` (fill the busiest GPU that
still qualifies: most berth share, then most processes, then most memory used), ``index``.
``prefer`` moves the listed GPUs to the front, in the order given. Ties keep index order.
"""

from __future__ import annotations

from berth.errors import UsageError
from berth.units import format_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    import random
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import Any, Literal

    from berth.devices.model import GpuSnapshot

ORDERS = ("random", "free", "util", "packed", "index")
_EPS = 1e-9


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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}es"


def _pct(v: float) -> str:
    return f"{v:g}%"


def _reasons(
    gpu: GpuSnapshot,
    req: Request,
    held: Held | None,
    only: set[int] | None,
    exclude: set[int],
    pos: int,
) -> list[str]:
    """Every reason this GPU does not qualify (empty: it qualifies)."""
    if not gpu.healthy:
        return [f"unhealthy: {gpu.error or 'unknown error'}"]
    why: list[str] = []
    if only is not None and pos not in only:
        why.append("not in --only")
    if pos in exclude:
        why.append("excluded")
    if gpu.index in req.banned:
        why.append(req.banned[gpu.index])
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
        if req.mem is not None and total is not None and held.memory + req.mem > total:
            why.append(
                f"berth claims declare {format_size(held.memory)} of {format_size(total)}, "
                f"{format_size(req.mem)} more does not fit"
            )
    elif req.mem is not None and total is not None and req.mem > total:
        why.append(f"total {format_size(total)} < --mem {format_size(req.mem)}")

    if not gpu.logical:
        why.extend(_telemetry(gpu, req, held, shared))
    if req.predicate is not None and not why and not req.predicate(gpu):
        why.append("rejected by predicate")
    return why


def _telemetry(gpu: GpuSnapshot, req: Request, held: Held | None, shared: bool) -> list[str]:
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
        why = _reasons(gpu, request, held.get(gpu.uuid), only, exclude, pos)
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


def _make_callable() -> None:
    """``berth.select`` names both this module and the API function ``berth.select(...)``;
    once the module is imported it shadows the function as an attribute of ``berth``, so the
    module itself is made callable: calling it calls :func:`berth.api.select`."""
    import sys
    import types

    class _SelectModule(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> list[GpuSnapshot]:
            from berth.api import select as api_select

            return api_select(*args, **kwargs)

    sys.modules[__name__].__class__ = _SelectModule


_make_callable()
