"""What a caller asks of the GPUs, named once: :class:`Filters`.

How many (``count`` GPUs, or a ``share`` of one, with ``mem`` declared per GPU), which qualify
(the filters) and in which order. Every way in builds this one object, so each filter has one
name, one default, one check and one message:

- ``berth.select(...)``, ``berth.acquire(...)``, ``berth.api.selection(...)`` take the filters
  as keyword arguments (:class:`FilterArgs`, through :meth:`Filters.of`: an unknown keyword is
  a TypeError naming it);
- ``berth select`` and ``berth run`` add the options of the fields that have one
  (:func:`berth.cli.filters.add_arguments`, built from these fields) and build it from argparse
  in one place (:func:`berth.cli.filters.from_args`);
- the earlier tools' modules (``berth.compat``) build it from their own parameters.

Messages name a value as ``berth select``'s option does (``--max-util 150: ...``), from Python
too: the API takes the same parameters. Numbers may be typed as people do (``"80%"``,
``"250W"``), sizes as ``"20G"`` or bytes. Pure: no I/O, no clock. How a GPU fails a filter (the
reasons) is :mod:`berth.selection.reasons`.
"""

from __future__ import annotations

from berth.errors import UsageError
from berth.record import Record, field, record, unexpected
from berth.units import format_size, parse_gpu_list, parse_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    import random
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, Literal, TypedDict, Unpack

    from berth.devices.model import GpuSnapshot

    Order = Literal["random", "free", "util", "packed", "index"]
    GpuIds = int | str | Iterable[int | str] | None

    class FilterArgs(TypedDict, total=False):
        """The filters as keyword arguments, values as people give them (the keyword fields of
        :class:`Filters`: tests/select/test_filters.py keeps the two the same)."""

        mem: int | str | None
        min_free: int | str | None
        max_util: float | str | None
        max_mem_util: float | str | None
        max_power: float | str | None
        max_procs: int | None
        name: str | None
        only: GpuIds
        exclude: GpuIds
        prefer: GpuIds
        order: Order | None
        predicate: Callable[[GpuSnapshot], bool] | None
        banned_names: Sequence[str] | None
        seed: int | random.Random | None


ORDERS = ("random", "free", "util", "packed", "index")
AUTO = "auto"


def _whole(value: object, label: str, low: int = 0) -> int:
    number = value
    if isinstance(value, str):
        number = int(value) if value.strip().lstrip("-").isdigit() else None
    if isinstance(number, bool) or not isinstance(number, int) or number < low:
        raise UsageError(f"{label} {value!r}: expected a whole number, {low} or more")
    return number


def _whole_gpus(value: object, label: str) -> int:
    return _whole(value, label, low=1)


def _number(value: object, label: str, top: float | None = None) -> float | None:
    """A number of 0 or more (at most ``top``); ``"80%"`` and ``"250W"`` as typed."""
    if value is None:
        return None
    number = value
    if isinstance(value, str):
        try:
            number = float(value.strip().rstrip("%Ww"))
        except ValueError:
            number = None
    if (
        isinstance(number, bool)
        or not isinstance(number, (int, float))
        or not number >= 0  # NaN too
        or (top is not None and number > top)
    ):
        bound = f"0 to {top:g}" if top is not None else "0 or more"
        raise UsageError(f"{label} {value!r}: expected a number, {bound}")
    return number


def _percent(value: object, label: str) -> float | str | None:
    return AUTO if value == AUTO else _number(value, label, top=100)


def _procs(value: object, label: str) -> int | None:
    return None if value is None else _whole(value, label)


def _share(value: object, label: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise UsageError(f"{label} {value!r}: must be above 0 and at most 1 (a whole GPU)")
    return float(value)


def _size(value: Any, label: str) -> int | None:
    return None if value is None else parse_size(value, what=label)


def _ids(value: object, label: str) -> tuple[str, ...]:
    """GPU indices or UUIDs given as ``"0,2"``, ``2`` or ``["0", "GPU-..."]``, as strings."""
    if value is None:
        return ()
    items: Iterable[object]
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        items = str(value).split(",")
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = value
    else:
        raise UsageError(f"{label} {value!r}: expected GPU indices or UUIDs, e.g. 0,2")
    out: list[str] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            raise UsageError(f"{label} {item!r}: expected a GPU index or UUID")
        text = str(item).strip()
        if text.lstrip("-").isdigit() and int(text) < 0:
            raise UsageError(f"{label} {text}: GPU indices are 0 or more")
        if text:
            out.append(text)
    return tuple(out)


def _gpu_list(text: str, label: str) -> tuple[str, ...]:
    """A GPU list typed on the command line: indices, ranges (0-3,6), UUIDs."""
    return parse_gpu_list(text, what=label, uuids=True)


def _name(value: object, label: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise UsageError(f"{label} {value!r}: expected a string")
    return value


def _order(value: object, label: str) -> object:
    if value is not None and value not in ORDERS:
        raise UsageError(f"{label} {value!r}: expected one of {', '.join(ORDERS)}")
    return value


def _predicate(value: object, label: str) -> object:
    if value is not None and not callable(value):
        raise UsageError(f"{label} {value!r}: expected a function of a GpuSnapshot")
    return value


def _names(value: Any, label: str) -> tuple[str, ...]:
    return tuple(value or ())


def _seed(value: object, label: str) -> random.Random | None:
    if value is None:
        return None
    import random as _random  # rare: a seed

    if isinstance(value, _random.Random):
        return value
    return _random.Random(_whole(value, label))


def _option(
    check: Callable[[Any, str], Any],
    flag: str,
    metavar: str,
    help: str,
    *,
    default: object = None,
    text: Callable[[str, str], object] | None = None,
) -> Any:
    """A filter that ``berth select`` and ``berth run`` take as the option ``flag``; ``text``
    reads what was typed, where ``check`` alone does not."""
    return field(default=default, check=check, label=flag, kw_only=True, meta=(metavar, help, text))


@record
class Filters(Record):
    """What a caller asks of the GPUs (see the module docstring). Checked and normalised when
    made; frozen. Defaults follow gpuselect: one GPU, idle (utilisation 0, memory utilisation
    0, no processes). ``max_util``/``max_mem_util`` default to "auto": 0 while ``max_procs``
    is 0 (idle), no limit once processes are allowed (a GPU that runs a process is loaded;
    ``--max-procs 1 --order packed`` is meant to fill it). ``None`` disables a filter. The
    order defaults to random among equals for whole GPUs (people starting at once spread out)
    and to packed for shares (half-GPU jobs pair up on one GPU, whole GPUs stay free)."""

    count: int = field(default=1, check=_whole_gpus, label="-n/--count")
    share: float = field(default=1.0, check=_share, label="share")
    mem: int | None = field(default=None, check=_size, label="--mem", kw_only=True)
    min_free: int | None = _option(
        _size, "--min-free", "SIZE", "at least this much free memory, e.g. 20G"
    )
    max_util: float | None = _option(
        _percent, "--max-util", "PCT",
        "max utilisation %% (default: 0 if --max-procs is 0, else no limit)", default=AUTO,
    )  # fmt: skip
    max_mem_util: float | None = _option(
        _percent, "--max-mem-util", "PCT",
        "max memory-bandwidth utilisation %% (default as --max-util)", default=AUTO,
    )  # fmt: skip
    max_power: float | None = _option(_number, "--max-power", "WATTS", "max power draw in W")
    max_procs: int | None = _option(
        _procs, "--max-procs", "N", "max processes outside berth on the GPU (0)", default=0
    )
    name: str | None = _option(
        _name, "--name", "NAME", "GPU name contains this (case-insensitive), e.g. A100"
    )
    only: tuple[str, ...] = _option(
        _ids, "--only", "IDS", "only these indices/UUIDs, e.g. 2, 0,1 or 0-3", text=_gpu_list
    )
    exclude: tuple[str, ...] = _option(
        _ids, "--exclude", "IDS", "never these indices/UUIDs", text=_gpu_list
    )
    prefer: tuple[str, ...] = _option(
        _ids, "--prefer", "IDS", "these first when they qualify, else others", text=_gpu_list
    )
    order: Order = _option(_order, "--order", "ORDER", "random, free, util, packed or index")
    predicate: Callable[[GpuSnapshot], bool] | None = field(
        default=None, check=_predicate, label="predicate", kw_only=True
    )
    banned_names: tuple[str, ...] = field(default=(), check=_names, kw_only=True)
    seed: random.Random | None = field(default=None, check=_seed, label="seed", kw_only=True)

    def __post_init__(self) -> None:
        if self.share < 1 and self.count != 1:
            raise UsageError(
                f"share {self.share:g} of {self.count} GPUs: a fractional share is of 1 GPU"
            )
        idle = 0 if self.max_procs == 0 else None
        for name in ("max_util", "max_mem_util"):
            if getattr(self, name) == AUTO:
                self._set(name, idle)
        if self.order is None:
            self._set("order", "random" if self.share >= 1 else "packed")

    @classmethod
    def of(
        cls, count: object, share: object, caller: str, /, **filters: Unpack[FilterArgs]
    ) -> Filters:
        """From keyword arguments (:class:`FilterArgs`) given to ``caller`` (a function's name,
        for the TypeError an unknown keyword raises)."""
        for key in filters:
            if key not in KEYWORDS:
                raise unexpected(f"{caller}()", key, KEYWORDS)
        values: dict[str, Any] = {**filters, "count": count, "share": share}
        return cls(**values)

    def describe(self) -> str:
        """What is asked, in words: "2 GPUs with >= 20.0G free"."""
        n = self.count
        text = (
            f"{n} GPU{'s' if n > 1 else ''}"
            if self.share >= 1
            else f"a {self.share:g} share of a GPU"
        )
        if self.mem:
            text += f" with {format_size(self.mem)} declared"
        if self.min_free is not None:
            text += f" with >= {format_size(self.min_free)} free"
        if self.name:
            text += f" named like {self.name!r}"
        if self.only:
            text += f" among {','.join(self.only)}"
        return text


KEYWORDS = tuple(name for name, f in Filters.__fields__.items() if f.kw_only)
"""The filters callers give by keyword (the keys of :class:`FilterArgs`)."""


def for_python(text: str) -> str:
    """``text`` (an error's words, naming the options of ``berth select``/``run``) in the words
    of a Python caller: each option as the keyword argument it is (``--min-free 'lots'`` ->
    ``min_free='lots'``, ``--all`` -> ``all=True``), so ``berth.acquire()`` and
    ``berth.select()`` name their own arguments."""
    import re  # rare: an error for a Python caller

    names = {f.label: f.name for f in Filters.__fields__.values() if f.label and f.label[0] == "-"}
    names["--all"] = "all"
    flags = "|".join(re.escape(k) for k in sorted(names, key=len, reverse=True))

    def said(m: re.Match[str]) -> str:
        name = names[m.group(1)]
        if name == "all":
            return "all=True" + (m.group(2) or "")
        return name + ("=" if m.group(2) else "")

    # a value follows a flag when it starts as one does: a quote, a digit, a sign, a list
    return re.sub(rf"(?<![\w-])({flags})(?![\w-])( (?=['\"\d\[(-]))?", said, text)

