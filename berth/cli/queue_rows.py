"""`berth queue`'s table, fitted to the terminal's width.

Columns as Slurm's squeue: JOBID NAME USER ST TIME GPUS NODELIST(REASON). A name longer than
its column is cut in the middle (``train-resn~-seed-3``): the two ends are what tell jobs
apart (a project's prefix, a run's number). On a terminal no line is wider than the window;
what gives way first is what matters least, one step at a time, each only as far as needed:

1. a pending job's place in line loses its ``waited``, then ``share``, then ``prio`` part;
2. NAME narrows, down to :data:`NAME_FEWEST` characters (cut in the middle);
3. the place in line (``#2``) goes, then USER narrows to :data:`USER_FEWEST`;
4. a line still too wide ends in ``~``.

To a pipe or a file (no width) every line is whole, names cut in the middle to
:data:`NAME_MOST`, as before.
"""

from __future__ import annotations

import time

from berth.cli.escape import shown
from berth.state_codes import CODES
from berth.units import format_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from berth.backends.base import JobInfo

    Row = list[Any]  # [the id as shown, its JobInfo]

# squeue's codes of Slurm's own words that berth's states fold (NODE_FAIL is berth's LOST)
NATIVE_CODES = {"NODE_FAIL": "NF"}
HEAD = ("JOBID", "NAME", "USER", "ST", "TIME", "GPUS", "NODELIST(REASON)")
# On Slurm, squeue's own columns too: PARTITION and NODES (from the job's ``extra``)
SLURM_HEAD = ("JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES", "GPUS",
              "NODELIST(REASON)")  # fmt: skip
RIGHT = ("JOBID", "TIME", "NODES")  # right-justified, as squeue
NAME_MOST = 20
NAME_FEWEST = 8
USER_MOST = 12
USER_FEWEST = 6


def middle_cut(text: str, width: int) -> str:
    """``text`` in ``width`` characters: whole if it fits, else its two ends around a ``~``
    (the head one character longer than the tail)."""
    if len(text) <= width:
        return text
    if width < 3:
        return text[:width]
    tail = (width - 1) // 2
    return text[: width - 1 - tail] + "~" + text[len(text) - tail :]


def place_parts(r: JobInfo) -> list[str]:
    """A pending job's place in line and why there, part by part: ``#2``, ``prio 10``,
    ``share 0.42``, ``waited 5:02`` (its priority, its user's fair-share factor, its wait),
    when the backend says."""
    x = r.extra or {}
    if x.get("order") is None:
        return []
    parts = [f"#{x['order']}", f"prio {x.get('priority', 0)}"]
    if x.get("share_factor") is not None:
        parts.append(f"share {x['share_factor']:.2f}")
    if x.get("queued_at") is not None:
        parts.append(f"waited {format_duration(max(0.0, time.time() - x['queued_at']))}")
    return parts


def _where(base: str, parts: Sequence[str]) -> str:
    if not parts:
        return base
    return f"{base} {parts[0]}" + (" " + ", ".join(parts[1:]) if len(parts) > 1 else "")


class _Line:
    __slots__ = ("base", "cells", "parts")

    def __init__(self, cells: list[str], base: str, parts: list[str]) -> None:
        self.cells = cells  # JOBID NAME USER ST TIME GPUS, whole
        self.base = base  # NODELIST(REASON) without the place in line
        self.parts = parts  # the place in line's parts, dropped from the end to fit


def format_rows(
    rows: list[Row], header: bool = True, width: int | None = None, slurm: bool = False
) -> str:
    """The table, every line at most ``width`` characters (None: no limit); ``slurm``: with
    squeue's PARTITION and NODES columns."""
    head = SLURM_HEAD if slurm else HEAD
    lines = [_Line(list(head[:-1]), head[-1], [])]
    for shown_id, r in rows:
        pending = r.state == "PENDING"
        cells = {
            "JOBID": shown_id, "NAME": shown(r.name), "USER": shown(r.user),
            "ST": NATIVE_CODES.get(r.native or "") or CODES.get(r.state, "?"),
            "TIME": format_duration(r.elapsed) if r.elapsed is not None else "0:00",
            "GPUS": r.gpus, "PARTITION": shown((r.extra or {}).get("partition") or ""),
            "NODES": str((r.extra or {}).get("nodes") or ""),
        }  # fmt: skip
        retry = (r.extra or {}).get("retry_of")  # (--retry-oom's retry of an OOM death)
        lines.append(_Line(
            [cells[h] for h in head[:-1]],
            (f"({r.reason or 'None'})" if pending else r.where)
            + (f" retry of {retry} (CUDA OOM)" if retry is not None else ""),
            place_parts(r) if pending else [],
        ))  # fmt: skip
    caps = {head.index("NAME"): NAME_MOST, head.index("USER"): USER_MOST}  # (narrowed)
    right = {head.index(h) for h in RIGHT if h in head}
    text = _fit(lines, caps, width, right)
    if not header:
        text.pop(0)
    return "".join(line + "\n" for line in text)


def _render(lines: list[_Line], caps: dict[int, int], right: set[int]) -> list[str]:
    def cell(line: _Line, i: int) -> str:
        c = line.cells[i]
        return middle_cut(c, caps[i]) if i in caps else c

    n = len(lines[0].cells)
    widths = [max(len(cell(line, i)) for line in lines) for i in range(n)]
    out = []
    for line in lines:
        cells = [
            cell(line, i).rjust(widths[i]) if i in right else cell(line, i).ljust(widths[i])
            for i in range(n)
        ]
        out.append(" ".join(cells) + " " + _where(line.base, line.parts))
    return out


def _fit(lines: list[_Line], caps: dict[int, int], width: int | None, right: set[int]) -> list[str]:
    """The lines rendered, narrowed step by step (the module's docstring) to ``width``."""
    text = _render(lines, caps, right)
    if width is None:
        return text

    def over() -> int:
        return max(len(t) for t in text) - width

    # 1. each too-wide line drops the least of its place in line (keeping its #N for now)
    for k, line in enumerate(lines):
        columns = len(text[k]) - len(_where(line.base, line.parts))  # (the same on every line)
        while columns + len(_where(line.base, line.parts)) > width and len(line.parts) > 1:
            line.parts.pop()
    text = _render(lines, caps, right)
    # 2. NAME narrows, 3. #N goes, USER narrows
    for step in ("name", "order", "user"):
        if over() <= 0:
            break
        if step == "order":
            for k, line in enumerate(lines):
                if len(text[k]) > width:
                    line.parts = []
        else:
            name, user = sorted(caps)
            i, fewest = (name, NAME_FEWEST) if step == "name" else (user, USER_FEWEST)
            now = max(len(line.cells[i][: caps[i]]) for line in lines)
            caps[i] = max(fewest, now - over())
        text = _render(lines, caps, right)
    # 4. what still does not fit ends in "~"
    return [t if len(t) <= width else t[: max(width - 1, 0)] + "~" for t in text]
