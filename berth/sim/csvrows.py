"""CSV rows of a trace or node list, read strictly: every value that is missing, not a
number, not finite, negative or not whole where it must be is an error naming the file, the
line and the field, and saying what to do (nothing is silently dropped or clamped).

    for row in rows(f, path, ("timestamp", "duration")):
        duration = row.number("duration")
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Iterator, Sequence

from berth.errors import UsageError

FIX = "fix or remove that row"


class Row:
    """One data row: ``line`` is its line in the file (1 = the header)."""

    __slots__ = ("data", "line", "path")

    def __init__(self, path: str, line: int, data: dict[str, str]) -> None:
        self.path, self.line, self.data = path, line, data

    def error(self, field: str, what: str) -> UsageError:
        return UsageError(f"{self.path!r}, line {self.line}, field {field!r}: {what}")

    def has(self, field: str) -> bool:
        """Whether the field is there and not empty."""
        return bool((self.data.get(field) or "").strip())

    def text(self, field: str, default: str | None = None) -> str:
        """The field's text; empty is an error unless there is a ``default``."""
        value = (self.data.get(field) or "").strip()
        if value:
            return value
        if default is not None:
            return default
        raise self.error(field, f"is empty: it needs a value; {FIX}")

    def number(self, field: str, *, whole: bool = False) -> float:
        """A finite number, 0 or more (an integer with ``whole``)."""
        raw = self.text(field)
        try:
            value = float(raw)
        except ValueError:
            raise self.error(field, f"{raw!r} is not a number; {FIX}") from None
        if not math.isfinite(value):
            raise self.error(field, f"{raw!r} is not a finite number; {FIX}")
        if value < 0:
            raise self.error(field, f"{raw!r} is negative: it must be 0 or more; {FIX}")
        if whole and value != int(value):
            raise self.error(field, f"{raw!r} is not a whole number; {FIX}")
        return value


def rows(f: Iterable[str], path: str, required: Sequence[str]) -> Iterator[Row]:
    """The data rows of a CSV file with a header that has every ``required`` column; a row
    with fewer or more fields than the header (a truncated or garbled line) is an error."""
    reader = csv.DictReader(f)
    header = reader.fieldnames
    if not header:
        raise UsageError(f"{path!r} is empty: expected a CSV header ({', '.join(required)}, ...)")
    missing = [c for c in required if c not in header]
    if missing:
        raise UsageError(
            f"{path!r} has no column {', '.join(repr(c) for c in missing)} "
            f"(its header: {','.join(header)[:120]}); is it the right file and --format?"
        )
    for data in reader:
        line = reader.line_num
        extra = data.pop(None, None)
        if extra is not None:
            raise UsageError(
                f"{path!r}, line {line}: {len(header) + len(extra)} fields, the header has "
                f"{len(header)}; {FIX}"
            )
        short = [k for k in header if data.get(k) is None]
        if short:
            raise UsageError(
                f"{path!r}, line {line}: {len(header) - len(short)} fields, the header has "
                f"{len(header)} (a truncated line?): field {short[0]!r} is missing; {FIX}"
            )
        yield Row(path, line, data)
