"""`berth admin reserve`, `berth admin reservations`, `berth admin unreserve`: GPUs kept for a
user, a group or a project over a time window (docs/admin.md "Reservations"). The options, the
request, and the listing with its text timeline; :mod:`berth.cli.admin` dispatches here.
"""

from __future__ import annotations

import time

from berth.cli.escape import shown
from berth.errors import UsageError
from berth.units import format_duration, parse_begin, parse_duration, parse_gpu_indices

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

WIDTH = 60  # characters of the timeline


def add_parsers(sub: Any) -> None:
    r = sub.add_parser("reserve", help="reserve GPUs for a user, group or project (a window)")
    r.add_argument("--user", action="append", default=[], help="for this user (repeatable)")
    r.add_argument("--group", action="append", default=[],
                   help="for the members of this Unix group (repeatable)")  # fmt: skip
    r.add_argument("--project", action="append", default=[],
                   help="for the jobs of this project (repeatable)")  # fmt: skip
    r.add_argument("-g", "--gpus", type=int, metavar="N", help="any N GPUs (chosen now)")
    r.add_argument("--gpu-ids", metavar="IDS", help="these GPUs: 0,1 or 0-3")
    r.add_argument("--start", metavar="TIME", required=True,
                   help="when it opens: '2026-12-01 14:00', 14:00, now+1d, now")  # fmt: skip
    r.add_argument("--duration", metavar="T", help="how long: 2h, 90m, 1-00:00:00")
    r.add_argument("--end", metavar="TIME", help="or when it ends (as --start)")
    r.add_argument("--allow-unlimited", action="store_true",
                   help="let jobs without a time limit start on these GPUs before it opens "
                   "(they may still run when it does)")  # fmt: skip
    r.add_argument("--reason", help="why (shown with it)")
    r.add_argument("--json", action="store_true", help="machine-readable output")
    ls = sub.add_parser("reservations", help="the reservations, with a timeline")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    un = sub.add_parser("unreserve", help="remove a reservation")
    un.add_argument("id", type=int, help="the reservation's id (`berth admin reservations`)")
    un.add_argument("--json", action="store_true", help="machine-readable output")


def request(args: argparse.Namespace) -> dict[str, Any]:
    """The ``reserve`` request from the options; bad input is refused here, nothing sent."""
    now = time.time()
    start = parse_begin(args.start, now, what="--start")
    if (args.duration is None) == (args.end is None):
        raise UsageError("give how long it lasts: --duration 2h, or --end TIME (not both)")
    if args.duration is not None:
        span = parse_duration(args.duration, what="--duration")
        if not 0 < span < float("inf"):
            raise UsageError(f"--duration {args.duration!r}: must be positive and finite")
        end = start + span
    else:
        clock = "-" not in args.end and not args.end.strip().lower().startswith("now")
        # (a clock time alone: the start's day, or the next once passed: 22:00 to 02:00)
        end = parse_begin(args.end, start if clock else now, what="--end")
        if end <= start:
            raise UsageError(f"--end {args.end!r}: must be after --start ({when(start)})")
    if (args.gpus is None) == (args.gpu_ids is None):
        raise UsageError("say which GPUs: -g N (any N, chosen now) or --gpu-ids 0,1")
    fields: dict[str, Any] = {
        "users": args.user, "groups": args.group, "projects": args.project,
        "start": start, "end": end, "unlimited": args.allow_unlimited, "note": args.reason,
    }  # fmt: skip
    if args.gpus is not None:
        if args.gpus < 1:
            raise UsageError(f"-g {args.gpus}: reserve at least 1 GPU")
        fields["count"] = args.gpus
    else:
        fields["gpus"] = parse_gpu_indices(args.gpu_ids, what="--gpu-ids")
    return fields


def when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def line(r: dict[str, Any], now: float) -> str:
    """One reservation in words: "3  GPUs 0,1  alice  2026-12-01 14:00 -> 16:00 (2:00:00), in
    1-02:00:00"."""
    gpus = ("GPU " if len(r["gpus"]) == 1 else "GPUs ") + ",".join(map(str, r["gpus"]))
    span = format_duration(r["end"] - r["start"])
    state = (f"open, {format_duration(r['end'] - now)} left" if r["start"] <= now
             else f"opens in {format_duration(r['start'] - now)}")  # fmt: skip
    end = time.strftime("%H:%M" if when(r["end"])[:10] == when(r["start"])[:10] else
                        "%Y-%m-%d %H:%M", time.localtime(r["end"]))  # fmt: skip
    extra = "; jobs without a time limit may use them before" if r.get("unlimited") else ""
    why = f"; {shown(r['note'])}" if r.get("note") else ""
    return (f"{r['id']}  {gpus} for {shown(r['holders'])}  {when(r['start'])} -> {end} "
            f"({span}), {state}{extra}{why}")  # fmt: skip


def timeline(rows: list[dict[str, Any]], now: float, gpus: list[int]) -> str:
    """Each GPU's row from now to the last end: '.' free, the reservation's id (its last
    digit) where it holds the GPU."""
    if not rows:
        return ""
    last = max(r["end"] for r in rows)
    step = max((last - now) / WIDTH, 60.0)
    head = f"{'':8}{when(now)} (now){'':{max(1, WIDTH - 26)}}{when(last)}\n"
    out = [head]
    for g in sorted(set(gpus) | {g for r in rows for g in r["gpus"]}):
        cells = []
        for k in range(WIDTH):
            t = now + (k + 0.5) * step
            mark = next((str(r["id"])[-1] for r in rows
                         if g in r["gpus"] and r["start"] <= t < r["end"]), ".")  # fmt: skip
            cells.append(mark)
        out.append(f"GPU {g:<4}{''.join(cells)}\n")
    out.append(f"{'':8}(one character: {format_duration(step)})\n")
    return "".join(out)


def listing(reply: dict[str, Any]) -> str:
    rows, now = reply.get("reservations") or [], float(reply.get("now") or time.time())
    if not rows:
        return "no reservations\n"
    text = "".join(line(r, now) + "\n" for r in rows)
    return text + "\n" + timeline(rows, now, [])


def made(reply: dict[str, Any]) -> str:
    r = reply["reservation"]
    return f"reservation {line(r, time.time())}\n"


def removed(reply: dict[str, Any]) -> str:
    return f"removed {shown(reply['described'])}\n"
