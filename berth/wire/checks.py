"""Exact-type checks of values a client sends, with the refusal that names them.

Shared by the job spec (:mod:`berth.wire.jobspec`, on both sides of the socket) and the
daemon's checks of its other requests (:mod:`berth.daemon.requests.validate`). A value is checked by
*exact* type (``True`` is not an integer, ``2.0`` is not a priority), element by element, and
by range (finite numbers; strings without NUL, of bounded length). A refusal is a
``ProtocolError(BAD_REQUEST)`` whose message names the field and the value and says that
nothing was changed. Standard library only.
"""

from __future__ import annotations

from berth.wire.protocol import BAD_REQUEST, ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_ID = 2**63 - 1  # job ids are SQLite integers
MAX_TEXT = 64 * 1024  # a name, a path, a setup script line... (argv and env: the frame limit)


def bad(field: str, value: Any, want: str) -> ProtocolError:
    """The refusal of ``value`` in ``field``: ``"{field} = {value!r}: {want}; nothing was
    changed"`` (the value cut at 200 characters)."""
    shown = repr(value)
    if len(shown) > 200:
        shown = shown[:200] + "..."
    return ProtocolError(BAD_REQUEST, f"{field} = {shown}: {want}; nothing was changed")


def is_int(v: Any) -> bool:
    return type(v) is int  # not bool, not float


def integer(field: str, v: Any, low: int, high: int) -> int:
    if not is_int(v) or not low <= v <= high:
        raise bad(field, v, f"must be an integer from {low} to {high}")
    return int(v)


def _finite(v: float) -> bool:
    """math.isfinite(v) without loading math (a shared library: ~0.3 ms of every CLI start);
    an int too large for a float raises OverflowError as math.isfinite does."""
    f = float(v)
    return f - f == 0  # (inf - inf and nan - nan are nan)


def number(field: str, v: Any, low: float, high: float, *, low_open: bool = True) -> float:
    """A finite int or float in (low, high] (or [low, high] unless ``low_open``)."""
    ok = type(v) in (int, float) and _finite(v) and v <= high
    ok = ok and (v > low if low_open else v >= low)
    if not ok:
        bound = f"above {low:g}" if low_open else f"at least {low:g}"
        raise bad(field, v, f"must be a finite number {bound} and at most {high:g}")
    return v  # type: ignore[no-any-return]


def text(field: str, v: Any, *, empty: bool = False, limit: int = MAX_TEXT) -> str:
    if type(v) is not str:
        raise bad(field, v, "must be a string")
    if "\0" in v:
        raise bad(field, v, "must not contain a NUL character")
    if not empty and not v:
        raise bad(field, v, "must not be empty")
    if len(v) > limit:
        raise bad(field, v, f"is longer than {limit} characters")
    return v


def int_list(field: str, v: Any, low: int, high: int, *, empty: bool = False) -> list[int]:
    if type(v) is not list or not all(is_int(i) and low <= i <= high for i in v):
        raise bad(field, v, f"must be a list of integers from {low} to {high}")
    if not v and not empty:
        raise bad(field, v, "must not be empty")
    return list(v)
