"""`berth queue`'s options as squeue has them, on both backends: ``-j 12,13`` (these jobs,
in any state, as ``squeue -j``), ``-p/--partition gpu,debug`` (Slurm's partitions: the local
queue has none and refuses it), ``--me`` (my jobs) and ``-o FORMAT`` (squeue's format string:
``-o "%.8i %P %j %T %D %R"``; a field's width ``%10j`` left-justified, ``%.10j`` right, cut to
it as squeue does). Fields: :data:`FIELDS`.
"""

from __future__ import annotations

import os
import re

from berth.backends.base import named
from berth.cli.escape import shown
from berth.cli.queue_rows import NATIVE_CODES
from berth.errors import UsageError
from berth.state_codes import CODES
from berth.units import format_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any

    from berth.backends.base import JobInfo

    Row = list[Any]  # [the id as shown, its JobInfo]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-j", "--jobs", metavar="IDS", help="only these jobs (12,13_2), in any state")
    p.add_argument("-p", "--partition", metavar="NAMES",
                   help="only jobs of these Slurm partitions (comma-separated)")  # fmt: skip
    p.add_argument("--me", action="store_true", help="only my jobs (as -u $USER)")
    p.add_argument("-o", "--format", dest="format", metavar="FORMAT",
                   help="squeue's format string: %%i %%j %%u %%t %%T %%M %%D %%P %%R %%N %%r %%b")  # fmt: skip


def _x(r: JobInfo, key: str) -> str:
    value = (r.extra or {}).get(key)
    return "" if value is None else str(value)


# squeue's letter -> (its header, the cell of a row: [id as shown, JobInfo])
FIELDS: dict[str, tuple[str, Callable[[str, JobInfo], str]]] = {
    "i": ("JOBID", lambda s, r: s),
    "A": ("JOBID", lambda s, r: _x(r, "raw_id") or r.id),
    "F": ("ARRAY_JOB_ID", lambda s, r: r.array_job or _x(r, "raw_id") or r.id),
    "K": ("ARRAY_TASK_ID", lambda s, r: "N/A" if r.array_task is None else str(r.array_task)),
    "j": ("NAME", lambda s, r: shown(r.name)),
    "u": ("USER", lambda s, r: shown(r.user)),
    "t": ("ST", lambda s, r: NATIVE_CODES.get(r.native or "") or CODES.get(r.state, "?")),
    "T": ("STATE", lambda s, r: r.native or r.state),
    "M": ("TIME", lambda s, r: format_duration(r.elapsed) if r.elapsed is not None else "0:00"),
    "D": ("NODES", lambda s, r: _x(r, "nodes") or "1"),
    "P": ("PARTITION", lambda s, r: shown(_x(r, "partition"))),
    "R": ("NODELIST(REASON)",
          lambda s, r: f"({r.reason or 'None'})" if r.state == "PENDING" else r.where),
    "N": ("NODELIST", lambda s, r: r.where if r.state != "PENDING" else ""),
    "r": ("REASON", lambda s, r: r.reason or "None"),
    "b": ("GPUS", lambda s, r: r.gpus),
}  # fmt: skip

_FIELD = re.compile(r"%(\.)?(\d*)([A-Za-z%])")


def prepare(args: argparse.Namespace, backend: str) -> None:
    """The options checked, and turned into what `queue` asks the backend: ``--me`` is
    ``-u`` (its user), ``-j`` asks ended jobs too."""
    if args.me:
        me = _me()
        if args.user and args.user != me:
            raise UsageError(f"--me and -u {args.user}: name one user")
        args.user = me
    if args.partition and backend == "local":
        raise UsageError(
            f"-p/--partition {args.partition}: the local queue has no partitions "
            "(Slurm's: --backend slurm)"
        )
    if args.jobs:
        import argparse  # rare: -j (its error type)

        from berth.cli.job_ids import job_id  # rare: -j

        try:
            args.jobs = [job_id(i.strip()) for i in args.jobs.split(",") if i.strip()]
        except argparse.ArgumentTypeError as e:
            raise UsageError(f"-j: {e}") from None
        args.all = True  # (as squeue -j: whatever its state)
    if args.format is not None:
        parse(args.format)


def keep(rows: list[JobInfo], args: argparse.Namespace) -> list[JobInfo]:
    """The rows ``-j`` and ``-p`` name."""
    if args.jobs:
        rows = [r for r in rows if any(named(r, i) for i in args.jobs)]
    if args.partition:
        wanted = {p.strip() for p in args.partition.split(",") if p.strip()}
        rows = [r for r in rows if _x(r, "partition") in wanted]
    return rows


def parse(fmt: str) -> list[tuple[str, str, bool, int | None]]:
    """``-o``'s string as (literal text before, letter, right-justified, width) pieces; the
    text after the last field is a piece with letter ""."""
    out: list[tuple[str, str, bool, int | None]] = []
    at = 0
    for m in _FIELD.finditer(fmt):
        letter = m.group(3)
        if letter != "%" and letter not in FIELDS:
            known = " ".join(f"%{k}" for k in FIELDS)
            raise UsageError(f"-o {fmt!r}: berth has no field %{letter}; it has {known}")
        text = fmt[at : m.start()]
        if letter == "%":
            out.append((text + "%", "", False, None))
        else:
            width = int(m.group(2)) if m.group(2) else None
            out.append((text, letter, bool(m.group(1)), width))
        at = m.end()
    out.append((fmt[at:], "", False, None))
    return out


def render(rows: list[Row], fmt: str, header: bool) -> str:
    """The rows by ``-o``: one line each (a header line of the fields' names first)."""
    pieces = parse(fmt)

    def line(cell: Callable[[str], str]) -> str:
        parts = []
        for text, letter, right, width in pieces:
            parts.append(text)
            if letter:
                value = cell(letter)
                if width is not None:
                    value = value[:width].rjust(width) if right else value[:width].ljust(width)
                parts.append(value)
        return "".join(parts).rstrip() + "\n"

    out = [line(lambda k: FIELDS[k][0])] if header else []
    for shown_id, r in rows:

        def cell(k: str, shown_id: str = shown_id, r: JobInfo = r) -> str:
            return FIELDS[k][1](shown_id, r)

        out.append(line(cell))
    return "".join(out)


def _me() -> str:
    import pwd  # rare: --me

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())
