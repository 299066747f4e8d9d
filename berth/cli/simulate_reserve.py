"""`berth simulate --what-if` and admin reservations: the daemon's reservations are replayed
with the queue, and ``--reserve-gpus N --reserve-start TIME --reserve-duration T`` asks what
one more would cost the queue (:mod:`berth.sim.reservecost`): each pending job's start without
and with it, and the delay in all. In a replay (``berth simulate TRACE``) the same options
reserve GPUs in the replayed cluster (:func:`replayed`; ``--reserve-every 7d``: weekly).
"""

from __future__ import annotations

import json
import sys
import time

from berth.cli.escape import shown
from berth.errors import UsageError
from berth.units import format_duration, parse_begin, parse_duration, parse_gpu_indices

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any

    from berth.core.inventory import Gpu
    from berth.core.job import Job
    from berth.core.reservations import Window
    from berth.sim.traces import SimJob

WHO = "(the reservation)"  # the holder of a reservation asked about: submits nothing


def add_arguments(w: Any) -> None:
    w.add_argument("--reserve-gpus", type=int, metavar="N",
                   help="what a reservation of any N GPUs would cost the queue")  # fmt: skip
    w.add_argument("--reserve-gpu-ids", metavar="IDS", help="... or of these GPUs (0,1)")
    w.add_argument("--reserve-start", metavar="TIME",
                   help="... from TIME (as `berth admin reserve --start`: '2026-12-01 14:00', "
                   "now+1d)")  # fmt: skip
    w.add_argument("--reserve-duration", metavar="T", help="... for T (2h)")
    w.add_argument("--reserve-user", action="append", default=[], metavar="USER",
                   help="... held for USER (whose queued jobs may use it; default: nobody's; "
                   "in a replay a tenant: a Philly VC, an ITP cluster)")  # fmt: skip
    w.add_argument("--reserve-every", metavar="T",
                   help="a replay: the reservation again every T (7d: weekly) to its end")  # fmt: skip


def asked(args: argparse.Namespace) -> bool:
    return args.reserve_gpus is not None or args.reserve_gpu_ids is not None


def live(status: dict[str, Any]) -> list[Window]:
    """The daemon's reservations (its `status`) as the core's windows."""
    from berth.core.reservations import Window  # heavy: the simulator

    out = []
    for r in status.get("reservations") or ():
        users = frozenset(r.get("members") or r.get("users") or ())
        projects = frozenset(r.get("projects") or ())
        out.append(Window(int(r["id"]), tuple(r["gpus"]), float(r["start"]), float(r["end"]),
                          users, projects, str(r.get("holders") or ""), bool(r.get("unlimited"))))
    return out


def window(
    args: argparse.Namespace, inventory: list[Gpu], kept: list[Window], now: float
) -> Window:
    """The reservation asked about, checked as `berth admin reserve` checks one."""
    from berth.core.reservations import Window  # heavy: the simulator
    from berth.sim.reservecost import choose  # heavy: the simulator

    if args.reserve_gpus is not None and args.reserve_gpu_ids is not None:
        raise UsageError("give --reserve-gpus N or --reserve-gpu-ids, not both")
    if not args.reserve_start or not args.reserve_duration:
        raise UsageError("a reservation to weigh needs --reserve-start and --reserve-duration")
    start = parse_begin(args.reserve_start, now, what="--reserve-start")
    span = parse_duration(args.reserve_duration, what="--reserve-duration")
    if not 0 < span < float("inf"):
        raise UsageError(f"--reserve-duration {args.reserve_duration!r}: must be positive")
    end = start + span
    if args.reserve_gpu_ids is not None:
        gpus = _gpu_ids(args.reserve_gpu_ids, inventory, "GPUs here are")
    else:
        if args.reserve_gpus < 1:
            raise UsageError(f"--reserve-gpus {args.reserve_gpus}: at least 1")
        gpus = choose(inventory, args.reserve_gpus, start, end, kept)
        if len(gpus) < args.reserve_gpus:
            raise UsageError(f"--reserve-gpus {args.reserve_gpus}: only {len(gpus)} GPUs are "
                             "free of other reservations then")  # fmt: skip
    users = args.reserve_user
    return Window(0, gpus, start, end, frozenset(users), label=", ".join(users) or WHO)


def show(args: argparse.Namespace, win: Window, pending: list[Job], delays: Any, now: float,
         policy: str) -> None:  # fmt: skip
    """The cost: JSON (--json) or each pending job's start without and with, and a summary."""
    from berth.sim.reservecost import summary  # heavy: the simulator

    total = summary(delays)
    about = {"gpus": list(win.gpus), "start": win.start, "end": win.end,
             "users": sorted(win.users)}  # fmt: skip
    if args.json:
        jobs = [{"id": d.job_id, "without": d.before, "with": d.after, "delay": d.delay}
                for d in delays]  # fmt: skip
        sys.stdout.write(json.dumps({"now": now, "policy": policy, "reservation": about,
                                     "jobs": jobs, **total}) + "\n")  # fmt: skip
        return
    by_id = {j.id: j for j in pending}
    lines = [("JOBID", "NAME", "USER", "GPUS", "START_WITHOUT", "START_WITH", "LATER_BY")]
    for d in delays:
        j = by_id[d.job_id]
        later = "never" if d.delay is None else format_duration(d.delay) if d.delay > 1 else "-"
        lines.append((str(j.id), shown(j.name)[:20], shown(j.user), f"{d.gpus:g}",
                      _at(d.before), _at(d.after), later))  # fmt: skip
    widths = [max(len(r[k]) for r in lines) for k in range(len(lines[0]))]
    for r in lines:
        sys.stdout.write("  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)).rstrip()
                         + "\n")  # fmt: skip
    gpus = ("GPU " if len(win.gpus) == 1 else "GPUs ") + ",".join(map(str, win.gpus))
    sys.stdout.write(
        f"# a reservation of {gpus} for {shown(win.label)} from {_at(win.start)} for "
        f"{format_duration(win.end - win.start)}: {total['delayed']} of {total['pending']} pending "
        f"jobs start later, {format_duration(total['total_delay'])} in all "
        f"({total['gpu_hours']:.1f} GPU-hours), at most {format_duration(total['max_delay'])}"
        + (f"; {len(total['never'])} would not start within a year" if total["never"] else "")
        + f" (policy {policy}; jobs run until their time limit)\n"
    )


def _at(t: float | None) -> str:
    return "never" if t is None else time.strftime("%Y-%m-%dT%H:%M", time.localtime(t))


def replayed(args: argparse.Namespace, inventory: list[Gpu], jobs: Sequence[SimJob]
             ) -> list[Window]:  # fmt: skip
    """A replay's reservations (issue 32.3): ``--reserve-start`` is a time after the trace's
    first arrival (``2d9h``: day 2 at 09:00 when the trace starts at midnight), and
    ``--reserve-every T`` repeats the window every T until the replay can have ended (the
    last arrival plus all the work on all the GPUs: windows after the end change nothing).
    [] if none asked."""
    from berth.core.reservations import Window  # heavy: the simulator
    from berth.sim.reservecost import choose  # heavy: the simulator

    if not asked(args):
        for flag, value in (("--reserve-start", args.reserve_start),
                            ("--reserve-duration", args.reserve_duration),
                            ("--reserve-user", args.reserve_user),
                            ("--reserve-every", args.reserve_every)):  # fmt: skip
            if value:
                raise UsageError(f"{flag} needs the GPUs to reserve: --reserve-gpus N or "
                                 "--reserve-gpu-ids IDS")  # fmt: skip
        return []
    if args.reserve_gpus is not None and args.reserve_gpu_ids is not None:
        raise UsageError("give --reserve-gpus N or --reserve-gpu-ids, not both")
    if not args.reserve_start or not args.reserve_duration:
        raise UsageError("a reservation in a replay needs --reserve-start (a time after the "
                         "trace's first arrival: 2d9h) and --reserve-duration")  # fmt: skip
    start = parse_duration(args.reserve_start, what="--reserve-start (in a replay: a time "
                           "after the trace's first arrival, like 2d9h)")  # fmt: skip
    span = parse_duration(args.reserve_duration, what="--reserve-duration")
    if not 0 < span < float("inf") or not 0 <= start < float("inf"):
        raise UsageError(f"--reserve-start {args.reserve_start!r} and --reserve-duration "
                         f"{args.reserve_duration!r}: a time >= 0 and a positive duration")  # fmt: skip
    every = None
    if args.reserve_every:
        every = parse_duration(args.reserve_every, what="--reserve-every")
        if not span <= every < float("inf"):
            raise UsageError(f"--reserve-every {args.reserve_every!r}: at least the "
                             f"--reserve-duration ({format_duration(span)})")  # fmt: skip
    if args.reserve_gpu_ids is not None:
        gpus = _gpu_ids(args.reserve_gpu_ids, inventory, "the inventory's GPUs are")
    else:
        if not 1 <= args.reserve_gpus <= len(inventory):
            raise UsageError(f"--reserve-gpus {args.reserve_gpus}: from 1 to the inventory's "
                             f"{len(inventory)} GPUs")  # fmt: skip
        gpus = choose(inventory, args.reserve_gpus, start, start + span, [])
    first = min((j.submit for j in jobs), default=0.0)
    last = max((j.submit for j in jobs), default=0.0)
    last += sum(j.duration * j.gpus for j in jobs) / max(len(inventory), 1)
    users = frozenset(args.reserve_user)
    label = ", ".join(sorted(users)) or WHO
    out: list[Window] = []
    t = first + start
    while True:
        out.append(Window(len(out) + 1, gpus, t, t + span, users, label=label))
        if every is None or t + every > last:
            return out
        t += every


def describe(windows: Sequence[Window], jobs: Sequence[SimJob]) -> str:
    """The note under a replay's table: what was reserved."""
    w = windows[0]
    first = min((j.submit for j in jobs), default=0.0)
    gpus = ("GPU " if len(w.gpus) == 1 else "GPUs ") + ",".join(map(str, w.gpus))
    again = ""
    if len(windows) > 1:
        again = f", {len(windows)} times every {format_duration(windows[1].start - w.start)}"
    return (f"reserved {gpus} for {w.label} from {format_duration(w.start - first)} after "
            f"the first arrival for {format_duration(w.end - w.start)}{again}")


def _gpu_ids(text: str, inventory: Sequence[Gpu], known_are: str) -> tuple[int, ...]:
    """``--reserve-gpu-ids``'s GPUs, each one of the inventory's (else UsageError naming them)."""
    gpus = tuple(parse_gpu_indices(text, what="--reserve-gpu-ids"))
    known = {g.index for g in inventory}
    if not set(gpus) <= known:
        raise UsageError(f"--reserve-gpu-ids {text!r}: {known_are} "
                         f"{','.join(str(i) for i in sorted(known))}")  # fmt: skip
    return gpus
