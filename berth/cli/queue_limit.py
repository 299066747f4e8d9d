"""How much of the queue `berth queue` asks for, and says it left out; `--json`, streamed.

squeue prints every job, and so does berth wherever its output goes to a program (a pipe, a
file) or ``--all``, ``--json``, ``--tree``, ``--pty`` or ``-n/--limit N`` asks; on a
terminal it prints a screenful (the terminal's lines less the header and the last line) and
then one line that counts the rest: ``99,950 more pending (berth queue --limit 0 or | less
for all)``. The daemon then explains and sends only those lines
(:mod:`berth.daemon.requests.queueview`): a screen of a 100,000-job queue comes at once.
"""

from __future__ import annotations

import os
import shutil
import sys

from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from berth.backends.base import Backend

AROUND = 4  # lines of a screen that are not jobs: which daemon, the columns, the last line, the prompt
FEWEST = 5  # jobs shown on a terminal however short it is


def add_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-n", "--limit", type=int, metavar="N",
        help="at most N lines of jobs (0: all); default: all, but a screenful on a terminal",
    )  # fmt: skip


def limit(args: argparse.Namespace) -> int | None:
    """The lines to ask for: None for all (see the module docstring)."""
    n = getattr(args, "limit", None)
    if n is not None:
        if n < 0:
            raise UsageError(f"--limit {n}: give a number of lines, or 0 for all")
        return n or None
    if args.json or args.all or args.tree or args.pty or not sys.stdout.isatty():
        return None
    if args.users:
        return 0  # (no job list)
    return max(FEWEST, shutil.get_terminal_size().lines - AROUND)


def width() -> int | None:
    """The terminal's columns, when the listing goes to one (its lines are fitted to them:
    :mod:`berth.cli.queue_rows`); None to a pipe or a file (whole lines, as squeue)."""
    if not sys.stdout.isatty():
        return None
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except OSError:
        return None


def cut(text: str, width: int | None) -> str:
    """``text`` with no line wider than ``width`` (a longer one ends in ``~``)."""
    if width is None:
        return text
    lines = text.split("\n")  # (the last one: what follows the last "\n", often "")
    return "\n".join(ln if len(ln) <= width else ln[: max(width - 1, 0)] + "~" for ln in lines)


def more(left: dict[str, int]) -> str:
    """The last line of a cut listing: how many jobs it left out, by state (``99,950 more
    pending``; ``12 more: 2 running, 10 pending``), and how to see them all."""
    parts = [(k, s.lower()) for s, k in sorted(left.items(), key=_by_state) if k > 0]
    if not parts:
        return ""
    if len(parts) == 1:
        what = f"{parts[0][0]:,} more {parts[0][1]}"
    else:
        what = f"{sum(k for k, _ in parts):,} more: " + ", ".join(f"{k:,} {s}" for k, s in parts)
    return f"{what} (berth queue --limit 0 or | less for all)\n"


def _by_state(item: tuple[str, int]) -> tuple[int, str]:
    order = ("RUNNING", "COMPLETING", "PENDING")
    return (order.index(item[0]) if item[0] in order else len(order), item[0])


def write_json(backend: Backend, args: argparse.Namespace, states: list[str]) -> None:
    """`--json`: the local daemon's document, written out piece by piece as its frames come
    (:meth:`berth.backends.local.Local.queue_json`); on Slurm, its jobs as a list of rows of
    the same shape (:func:`berth.backends.base.as_row`)."""
    import json  # rare: --json

    chunks: Any = getattr(backend, "queue_json", None)
    sys.stdout.flush()
    if chunks is not None:
        if getattr(args, "jobs", None):
            raise UsageError("-j with --json: not on the local queue; `berth show ID --json` "
                             "gives one job")  # fmt: skip
        out = sys.stdout.buffer
        for piece in chunks(user=args.user, finished=args.all, states=states, project=args.project):
            out.write(piece)
        out.write(b"\n")
        return
    from berth.backends.base import as_row  # rare: --json on Slurm
    from berth.cli.queue_squeue import keep  # rare: --json on Slurm

    rows = keep(backend.list(user=args.user, finished=args.all, states=states), args)
    sys.stdout.write(json.dumps([as_row(r) for r in rows]) + "\n")
