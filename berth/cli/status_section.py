"""A section of `berth status` under its GPU table (the claims', :mod:`berth.cli.status_claims`;
the daemon's queue, :mod:`berth.cli.status_queue`), which :mod:`berth.cli.status` prints."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


class Section:
    """What a section adds: a titled block of lines after the GPU table, notes under given
    GPUs (index -> lines, e.g. "held by alice (lease 3f2a)"), and JSON data under ``key``."""

    __slots__ = ("data", "key", "lines", "notes", "title")

    def __init__(
        self,
        key: str,
        title: str = "",
        lines: Sequence[str] = (),
        notes: Mapping[int, Sequence[str]] | None = None,
        data: object = None,
    ) -> None:
        self.key = key
        self.title = title
        self.lines = list(lines)
        self.notes = dict(notes or {})
        self.data = data
