"""Parsing and formatting of sizes and durations typed by people.

Sizes follow what GPU users type: ``20G`` and ``20GiB`` both mean 20 x 1024**3 bytes (GPU memory
is reported in binary units by every tool, so a "G" that meant 10**9 would surprise), ``512M``,
``512MiB``, ``1T``; a bare number is MiB (as in ``--mem 8000`` of mgpu_srun). Durations accept
seconds (``90``), suffixed values (``90s``, ``15m``, ``2h``, ``1d``) and Slurm's forms
(``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``). GPU lists (:func:`parse_gpu_list`) take indices and
ranges (``0,2``, ``0-3``, ``0-3,6``, as the GPU Job Scheduler's ``allowed_gpus``) and, where a command
accepts them, UUIDs; every command that takes a GPU list parses it here. A GPU count (``-g``,
a job's ``gpus``, ``berth.acquire(gpus=...)``, ``core.job.Request``) is checked by one rule,
:func:`gpu_count`, with one message.
"""

from __future__ import annotations

from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4

_SIZE_UNITS = {
    "": MIB,
    "b": 1,
    "k": KIB, "kb": KIB, "kib": KIB,
    "m": MIB, "mb": MIB, "mib": MIB,
    "g": GIB, "gb": GIB, "gib": GIB,
    "t": TIB, "tb": TIB, "tib": TIB,
}  # fmt: skip


def parse_size(text: str | int | float, *, what: str = "size") -> int:
    """Parse ``20G`` / ``20GiB`` / ``512M`` / ``8000`` (MiB) into bytes.

    Numbers given as int/float from Python are bytes (``acquire(mem=...)`` accepts both forms).
    """
    if isinstance(text, bool):
        raise UsageError(f"invalid {what} {text!r}: expected a size such as 20G or 512MiB")
    if isinstance(text, (int, float)):
        if text < 0:
            raise UsageError(f"invalid {what} {text!r}: must not be negative")
        return int(text)
    raw = text.strip()
    number = raw.rstrip("bBkKmMgGtTiI")
    unit = raw[len(number) :].strip().lower()
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _SIZE_UNITS or value < 0 or value != value or value == float("inf"):
        raise UsageError(
            f"invalid {what} {text!r}: expected a size such as 20G, 20GiB, 512M or 512MiB"
        )
    return int(value * _SIZE_UNITS[unit])


def format_size(n: int | None, *, unit: str = "auto") -> str:
    """Format bytes for people: ``12.0G``, ``512M``; ``n/a`` for None."""
    if n is None:
        return "n/a"
    if unit == "MiB":
        return f"{n // MIB}MiB"
    for size, suffix in ((TIB, "T"), (GIB, "G"), (MIB, "M"), (KIB, "K")):
        if abs(n) >= size:
            value = n / size
            return f"{value:.1f}{suffix}" if value < 100 else f"{value:.0f}{suffix}"
    return f"{n}B"


#: Seconds between SIGTERM and SIGKILL when berth ends a job (a time limit, a cancel): the
#: default of ``[daemon] kill_after`` / ``--kill-after``, and the grace of an attempt whose own
#: is not known. The one place it is written.
KILL_AFTER = 30.0

_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_slurm_time(text: str, *, what: str = "-t/--time") -> float:
    """Parse a time limit as sbatch's ``-t/--time`` reads it, into seconds: a bare number is
    minutes (``90`` = 1:30:00), ``MM:SS``, ``H:MM:SS``, ``D-HH``, ``D-HH:MM[:SS]``; a unit
    may be given (``90s``, ``15m``, ``2h``, ``1d``). ``inf`` means no limit."""
    raw = text.strip()
    try:
        minutes = float(raw)
    except ValueError:
        return parse_duration(text, what=what)
    if minutes < 0 or minutes != minutes:
        raise UsageError(f"invalid {what} {text!r}: must not be negative")
    return minutes * 60


NO_LIMIT = ("inf", "infinite", "unlimited", "none")  # a duration's words for "no limit"
MAX_TIME_LIMIT = 366 * 86400.0  # a job's longest time limit, a year: "inf" (or none) for no limit


def parse_duration(text: str | int | float, *, what: str = "duration") -> float:
    """Parse a duration into seconds: ``90``, ``90s``, ``15m``, ``2h``, ``1d``, ``1:30:00``,
    ``2-00:00:00`` (Slurm's D-HH:MM:SS). ``inf`` means no limit."""
    if isinstance(text, bool):
        raise UsageError(f"invalid {what} {text!r}: expected e.g. 90, 15m, 2h or 1:30:00")
    if isinstance(text, (int, float)):
        if text < 0:
            raise UsageError(f"invalid {what} {text!r}: must not be negative")
        return float(text)
    raw = text.strip().lower()
    bad = UsageError(f"invalid {what} {text!r}: expected e.g. 90, 15m, 2h, 1:30:00 or 1-12:00:00")
    if raw in NO_LIMIT:
        return float("inf")
    try:
        days = 0.0
        if "-" in raw:
            d, raw = raw.split("-", 1)
            days = float(d)
            if ":" not in raw:
                raw = raw + ":00:00"  # D-HH
        if ":" in raw:
            parts = [float(p) for p in raw.split(":")]
            if len(parts) > 3 or any(p < 0 for p in parts):
                raise bad
            if days and len(parts) == 2:  # D-HH:MM
                parts.append(0.0)
            seconds = 0.0
            for p in parts:
                seconds = seconds * 60 + p
            return days * 86400 + seconds
        number = raw.rstrip("abcdefghijklmnopqrstuvwxyz")
        unit = raw[len(number) :]
        if unit not in _DURATION_UNITS:
            raise bad
        value = float(number)
    except ValueError:
        raise bad from None
    if value < 0 or value != value:
        raise bad
    return value * _DURATION_UNITS[unit]


def format_duration(seconds: float | None) -> str:
    """Format seconds as Slurm does: ``M:SS``, ``H:MM:SS``, ``D-HH:MM:SS``."""
    if seconds is None:
        return "n/a"
    if seconds == float("inf"):
        return "UNLIMITED"
    s = int(seconds)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}-{h:02d}:{m:02d}:{s:02d}"
    if h:
        return f"{h}:{m:02d}:{s:02d}"
    return f"{m}:{s:02d}"


GPU_COUNT_RULE = "must be a whole number of GPUs (1, 2...) or a share of one GPU below 1 (0.5)"


def gpu_count(value: object, what: str = "gpus", *, none: bool = False) -> float:
    """``value`` as a GPU count: an integer >= 1 (whole GPUs; ``2.0`` -> ``2``) or a share in
    (0, 1) of one GPU; with ``none``, also 0 (no GPU: the simulator's CPU-only pods). Anything
    else (a bool, a string, NaN, infinity, a negative number, ``1.5``) raises UsageError
    ``"{what} = {value!r}: " + GPU_COUNT_RULE``: the one rule and message for a GPU count,
    however it comes in (the job spec, ``core.job.Request``, ``berth.acquire``, ``-g``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        if 1 <= value < float("inf") and value == int(value):
            return int(value)
        if 0 < value < 1 or (none and value == 0):
            return value
    shown = repr(value)
    if len(shown) > 200:
        shown = shown[:200] + "..."
    raise UsageError(f"{what} = {shown}: {GPU_COUNT_RULE}")


MAX_GPU_INDEX = 1023  # as [inventory] gpus (at most 1024): bounds what a range may expand to
_HEX = frozenset("0123456789abcdefABCDEF")


def parse_gpu_list(text: str, *, what: str, uuids: bool = False) -> tuple[str, ...]:
    """GPU ids typed by people: ``"0,2"``, ``"0-3"``, ``"0-3,6"`` -> ``("0", "1", "2", "3",
    "6")``: in the order given, each once. With ``uuids``, an item may also be a UUID or a UUID
    prefix (``GPU-8e4c...``, ``MIG-...``, or the bare hex ``8e4c1a2b-...``), returned as typed.

    A range goes up (``3-1`` is refused) between indices; anything else with a dash that is
    not a UUID (``a-b``, ``1-x``) is refused too, with the value in the message.
    """
    out: list[str] = []

    def bad(why: str) -> UsageError:
        return UsageError(
            f"invalid {what} {text!r}: {why}; expected GPU indices and ranges such as "
            f"0,2 or 0-3,6" + (" (or UUIDs)" if uuids else "")
        )

    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        if _digits(item):
            ids = [int(item)]
        elif uuids and _is_uuid(item):
            if item not in out:
                out.append(item)
            continue
        elif item.startswith("-") and _digits(item[1:].strip()):
            raise bad(f"{item!r}: GPU indices are 0 or more")
        elif not uuids and item[:4].lower() in ("gpu-", "mig-"):
            raise bad(f"{item!r} is a UUID: {what} takes indices")
        elif "-" in item:
            low, _, high = item.partition("-")
            low, high = low.strip(), high.strip()
            if not (_digits(low) and _digits(high)):
                raise bad(f"{item!r} is not a range of indices (0-3)")
            if int(low) > int(high):
                raise bad(f"range {item!r} goes down (write {high}-{low})")
            ids = [int(low), int(high)] if int(high) > MAX_GPU_INDEX else []
            ids = ids or list(range(int(low), int(high) + 1))
        else:
            raise bad(f"{item!r} is not a GPU index")
        if max(ids) > MAX_GPU_INDEX:
            raise bad(f"{item!r}: GPU indices go up to {MAX_GPU_INDEX}")
        for i in ids:
            if str(i) not in out:
                out.append(str(i))
    if not out:
        raise bad("no GPU named")
    return tuple(out)


def parse_gpu_words(words: Sequence[str], *, what: str) -> tuple[str, ...]:
    """GPUs named by several words (``berth pause 0 3 4-7 GPU-8e4c``): indices, ranges, UUIDs,
    each once, in the order given."""
    out: list[str] = []
    for word in words:
        out += [g for g in parse_gpu_list(word, what=what, uuids=True) if g not in out]
    return tuple(out)


def parse_gpu_indices(text: str, *, what: str) -> list[int]:
    """:func:`parse_gpu_list` of indices only (``--gpu-ids 0-3,6`` -> ``[0, 1, 2, 3, 6]``)."""
    return [int(i) for i in parse_gpu_list(text, what=what)]


def _is_uuid(item: str) -> bool:
    """A UUID or UUID prefix as CUDA accepts them: ``GPU-``/``MIG-`` and anything after, or
    bare hex whose first group (before any dash) is the UUID's first 8 hex digits."""
    if item[:4].lower() in ("gpu-", "mig-"):
        return len(item) > 4
    head, dash, _ = item.partition("-")
    if not head or not set(head) <= _HEX or _digits(item):
        return False
    return not dash or len(head) == 8


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


# -- the dashboard's address (`berth daemon --http`, [daemon] http) ------------------------------

HTTP_DEFAULT = "127.0.0.1:8765"
HTTP_PORT = 8765
SYSTEM_HTTP_PORT = 865  # the system daemon's (root's): below 1024, so no user can take it


def default_http_port(system: bool) -> int:
    """Where ``--http`` without a port listens: below 1024 for the system daemon."""
    return SYSTEM_HTTP_PORT if system else HTTP_PORT


def parse_bind(
    text: str, allow_remote: bool = False, default: int = HTTP_PORT
) -> tuple[str, int]:
    """``127.0.0.1:8765``, ``[::1]:8765``, ``localhost:8765``, ``:8765`` or ``8765`` ->
    (host, port); a host alone gets port ``default``. A host that is not a loopback address
    is refused unless ``allow_remote``."""
    import ipaddress  # rare: --http, [daemon] http

    raw = text.strip()
    host, port_text = "127.0.0.1", raw
    if raw.startswith("["):
        host, _, rest = raw[1:].partition("]")
        port_text = rest.removeprefix(":") or str(default)
    elif ":" in raw:
        host, _, port_text = raw.rpartition(":")
        host = host or "127.0.0.1"
    elif not raw.isdigit():
        host, port_text = raw, str(default)
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise UsageError(
            f"--http {text!r}: the port must be a number 0..65535 (e.g. --http {HTTP_DEFAULT})"
        )
    if host == "localhost":
        host = "127.0.0.1"
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        raise UsageError(
            f"--http {text!r}: {host!r} is not an IP address; give one, e.g. --http {HTTP_DEFAULT}"
        ) from None
    if not addr.is_loopback and not allow_remote:
        raise UsageError(
            f"--http {text!r}: {host} is not a loopback address. The dashboard speaks plain "
            "HTTP (tokens would cross the network in clear): keep it on 127.0.0.1 and reach it "
            f"through `ssh -L {HTTP_PORT}:127.0.0.1:{HTTP_PORT} HOST`, or, behind a TLS "
            "proxy, allow it with --http-allow-remote ([daemon] http_allow_remote = true)"
        )
    return str(addr), int(port_text)


LATEST = 1e11  # the latest time berth takes (the year 5138): a job's --begin, --at, a reservation


def parse_begin(text: str, now: float, *, what: str = "--begin") -> float:
    """When a job may begin, as sbatch's ``--begin`` reads it, into Unix time: ``now+2h``
    (``now+90``: seconds, or a unit: ``s``, ``m``/``min``, ``h``/``hour``, ``d``/``day``),
    ``14:00`` or ``14:00:30`` (today, or tomorrow once that time has passed), ``2026-12-01``,
    ``2026-12-01T09:00[:SS]``; ``now``. In local time. Past :data:`LATEST` (``now+inf``,
    ``now+99999999d``): refused naming ``text``."""
    when = _when(text, now, what)
    if not when <= LATEST:
        raise UsageError(
            f"invalid {what} {text!r}: too far ahead (berth takes times up to the year 5138); "
            "give a nearer time"
        )
    return when


def _when(text: str, now: float, what: str) -> float:
    import datetime as dt  # rare: --begin

    raw = text.strip().lower()
    bad = UsageError(
        f"invalid {what} {text!r}: expected now+2h, 14:00, 2026-12-01 or 2026-12-01T09:00"
    )
    if raw == "now":
        return now
    if raw.startswith("now+"):
        amount = raw[4:]
        for long, short in (("minutes", "m"), ("minute", "m"), ("min", "m"), ("hours", "h"),
                            ("hour", "h"), ("days", "d"), ("day", "d"), ("seconds", "s"),
                            ("second", "s"), ("sec", "s")):  # fmt: skip
            if amount.endswith(long):
                amount = amount[: -len(long)] + short
                break
        if amount.isdigit():
            amount += "s"  # (sbatch: a bare number after now+ is seconds)
        try:
            return now + parse_duration(amount, what=what)
        except UsageError:
            raise bad from None
    local = dt.datetime.fromtimestamp(now).astimezone()
    try:
        if "t" in raw or "-" in raw:
            when = dt.datetime.fromisoformat(raw.upper() if "t" in raw else raw)
            if when.tzinfo is None:
                when = when.replace(tzinfo=local.tzinfo)
            return when.timestamp()
        clock = dt.time.fromisoformat(raw)
    except ValueError:
        raise bad from None
    when = local.replace(hour=clock.hour, minute=clock.minute, second=clock.second, microsecond=0)
    if when.timestamp() <= now:
        when += dt.timedelta(days=1)
    return when.timestamp()
