"""Parsing and formatting of sizes and durations typed by people.

Sizes follow what GPU users type: ``20G`` and ``20GiB`` both mean 20 x 1024**3 bytes (GPU memory
is reported in binary units by every tool, so a "G" that meant 10**9 would surprise), ``512M``,
``512MiB``, ``1T``; a bare number is MiB (as in ``--mem 8000`` of seed 003). Durations accept
seconds (``90``), suffixed values (``90s``, ``15m``, ``2h``, ``1d``) and Slurm's forms
(``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``).
"""

from __future__ import annotations

from berth.errors import UsageError

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


_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


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
    if raw in ("inf", "infinite", "unlimited", "none"):
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
