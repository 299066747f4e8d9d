"""Examples:

  berth queue                 # running and pending jobs of everyone
  berth queue -u alice        # only alice's
  berth queue -t PD           # only pending (states: PD R CG CD F CA TO PR LO, or full names)
  berth queue --all           # also jobs that ended in the last day
  berth queue --start         # when will pending jobs start? (as berth show and the dashboard)
  berth queue --users         # each user: running, pending, decayed usage, fair-share factor
  berth queue --json          # {"daemon": {...}, "jobs": [...], "users": [...]}
  berth queue --noheader      # no header lines (as squeue)
  berth queue -r              # an array's pending tasks one per line (default: 12_[3-9%2])
  berth queue --pty           # jobs with a terminal (--pty): `berth attach ID` shows its screen

The first line says which daemon answered: the system one (every user's, docs/admin.md) or
a user's own (see `berth help daemon`). Everyone sees every job (user, name, state, GPUs);
a daemon started with --private shows others' commands and paths to admins only.

Columns as Slurm's squeue: JOBID NAME USER ST TIME GPUS NODELIST(REASON). NODELIST names the
GPUs a running job holds (gpu:0,1); a pending job shows why it waits: (Resources), (Priority),
(Dependency), (Held), (GpuPaused), (GpuUnhealthy) for a lost GPU, (BeginTime) after a failed
attempt, (UserGpuLimit) when its user holds all the GPUs they may (`berth admin limits`),
(JobArrayTaskLimit) for an array's task held back by its %K. An array's tasks show as ID_TASK,
its pending ones folded into one line (12_[3-9%2]: tasks 3 to 9 wait, at most 2 run at once)
unless -r/--expand. Unprintable characters in names are shown escaped (\\xff); --json is the daemon's JSON as
it sent it: "daemon" (pid, socket, system, user, private, admins), "jobs", "users" and
"fairshare".

When more than one user has jobs, a block under the table gives each user's running jobs and
GPUs, pending jobs, usage (GPU-hours, decayed: docs/scheduling.md), its part of everyone's
usage, and the fair-share factor (Slurm's 2^(-usage/share): 1 = has used nothing, 0.5 = its
share, lower = more; the highest goes first), and the most GPUs they may hold.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import sys

from berth.client import Client, call
from berth.errors import UsageError
from berth.units import format_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-u", "--user", help="only this user's jobs")
    p.add_argument("-t", "--states", help="only these states, comma-separated (PD,R)")
    p.add_argument("--all", action="store_true", help="include jobs that ended in the last day")
    p.add_argument(
        "--start",
        action="store_true",
        help="when each pending job is expected to start (as berth show and the dashboard)",
    )
    p.add_argument(
        "--noheader", action="store_true", help="no header lines (which daemon, columns)"
    )
    p.add_argument(
        "--users", action="store_true", help="only each user's usage, share and jobs (no job list)"
    )
    p.add_argument(
        "-r", "--expand", action="store_true", help="one line per array task (as squeue -r)"
    )
    p.add_argument("--pty", action="store_true", help="only jobs with a terminal to attach to")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _uid(user: str) -> int:
    if user.isdigit():
        return int(user)
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        raise UsageError(f"no user {user!r} on this machine") from None


def shown(text: object) -> str:
    """``text`` safe to print on anyone's terminal: a job name is whatever its owner typed
    (``-J $'\\xff'`` arrives as a lone surrogate, which no UTF-8 stream can write; an escape
    sequence would reach other users' terminals). Unprintable characters are shown escaped:
    ``\\xff`` for a byte that was not UTF-8, ``\\x1b``, ``\\n``."""
    text = str(text)
    if text.isprintable():
        return text
    out = []
    for c in text:
        if c.isprintable():
            out.append(c)
        elif "\udc80" <= c <= "\udcff":  # a byte that was not UTF-8 (surrogateescape)
            out.append(f"\\x{ord(c) - 0xDC00:02x}")
        else:
            out.append(c.encode("unicode_escape").decode("ascii"))
    return "".join(out)


def which_daemon(info: dict[str, Any]) -> str:
    """The header line that says which daemon answered."""
    where = f"on {shown(info.get('socket'))} (pid {info.get('pid')})"
    if info.get("system"):
        return f"system daemon {where}"
    try:
        me = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        me = str(os.getuid())
    user = info.get("user")
    return f"your own daemon {where}" if user == me else f"{shown(user)}'s daemon {where}"


def compact(indices: list[int]) -> str:
    """``[3, 4, 5, 7, 9, 10]`` -> ``3-5,7,9-10``."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(indices):
        if run and i != run[-1] + 1:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = []
        run.append(i)
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def fold(rows: list[dict[str, Any]], expand: bool = False) -> list[dict[str, Any]]:
    """Rows as shown: an array's task as ``12_3``, and its pending tasks in one row,
    ``12_[3-9%2]`` (unless ``expand``), where its first pending task was."""
    out: list[dict[str, Any]] = []
    pending: dict[Any, tuple[dict[str, Any], list[int]]] = {}
    for r in rows:
        array = r.get("array_job")
        if array is None:
            out.append(r)
        elif expand or r["state"] != "PENDING":
            out.append({**r, "id": f"{array}_{r['array_task']}"})
        else:
            if array not in pending:
                pending[array] = (dict(r), [])
                out.append(pending[array][0])
            pending[array][1].append(int(r["array_task"]))
    for array, (first, tasks) in pending.items():
        limit = first.get("group_limit")
        inside = compact(tasks) + (f"%{limit}" if limit else "")
        one = len(tasks) == 1 and not limit
        first["id"] = f"{array}_{tasks[0]}" if one else f"{array}_[{inside}]"
    return out


def format_rows(rows: list[dict[str, Any]], header: bool = True) -> str:
    lines = [("JOBID", "NAME", "USER", "ST", "TIME", "GPUS", "NODELIST(REASON)")]
    for r in rows:
        if r["state"] == "PENDING":
            where = f"({r['reason'] or 'None'})"
        elif r["nodelist"]:
            where = "gpu:" + ",".join(str(g) for g in r["nodelist"])
        else:
            where = ""
        gpus = r["gpus"]
        lines.append(
            (
                str(r["id"]),
                shown(r["name"])[:20],
                shown(r["user"])[:12],
                r["st"],
                format_duration(r["time"]) if r["time"] is not None else "0:00",
                f"{gpus:g}" if isinstance(gpus, float) else str(gpus),
                where,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(6)]
    out = []
    for line in lines:
        cells = [
            line[i].rjust(widths[i]) if i in (0, 4) else line[i].ljust(widths[i]) for i in range(6)
        ]
        out.append(" ".join(cells) + " " + line[6])
    if not header:
        out.pop(0)
    return "".join(line + "\n" for line in out)


def run(args: argparse.Namespace) -> int:
    if args.start:  # as squeue --start: the daemon's estimates
        from berth.cli import starts  # rare: --start

        if args.user or args.states or args.all:
            raise UsageError("--start predicts every pending job: not with -u, -t or --all")
        return starts.run(args.json)

    fields: dict[str, Any] = {"all": args.all}
    if args.user:
        fields["uid"] = _uid(args.user)
    if args.states:
        fields["states"] = [s for s in args.states.split(",") if s.strip()]
    if args.json:
        _json(fields)
        return 0
    reply = call("queue", **fields)
    header = not args.noheader
    if header and reply.get("daemon"):
        sys.stdout.write(which_daemon(reply["daemon"]) + "\n")
    users = reply.get("users") or []
    if args.users:
        sys.stdout.write(format_users(users, reply.get("fairshare") or {}, header))
        return 0
    if args.pty:
        return _ptys(reply["jobs"], header)
    sys.stdout.write(format_rows(fold(reply["jobs"], args.expand), header))
    if sum(1 for u in users if u["running"] or u["pending"]) > 1 and not args.user:
        sys.stdout.write("\n" + format_users(users, reply.get("fairshare") or {}, header))
    return 0


def _ptys(rows: list[dict[str, Any]], header: bool) -> int:
    """Seed 002's `screens`: the running jobs that have a terminal, and how to see it."""
    rows = [
        r for r in fold(rows, expand=True)
        if r.get("pty") and r["state"] in ("RUNNING", "COMPLETING")
    ]  # fmt: skip
    sys.stdout.write(format_rows(rows, header))
    if header and rows:
        sys.stdout.write(
            f"`berth attach {rows[0]['id']}` shows a job's screen as it is now and lets you "
            "type into it (Ctrl-] detaches)\n"
        )
    elif header:
        sys.stdout.write("no running job has a terminal (`berth submit --pty` gives one)\n")
    return 0


def format_users(users: list[dict[str, Any]], fair: dict[str, Any], header: bool = True) -> str:
    """Each user's line: running jobs, GPUs held, pending jobs, decayed usage, its part of
    all usage, the fair-share factor, the most GPUs they may hold."""
    lines = [
        ("USER", "RUNNING", "GPUS", "PENDING", "USAGE(GPU-h)", "USE%", "FAIRSHARE", "MAX_GPUS")
    ]
    for u in users:
        most = u.get("max_gpus")
        lines.append(
            (
                shown(u["user"])[:12],
                str(u["running"]),
                f"{u['gpus']:g}",
                str(u["pending"]),
                f"{u['usage_gpu_hours']:.2f}",
                f"{100 * u['usage_fraction']:.0f}%",
                f"{u['factor']:.2f}"
                + ("" if u.get("shares", 1.0) == 1.0 else f" (x{u['shares']:g})"),
                "-" if most is None else f"{most:g}",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = [
        " ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in lines
    ]
    if not header:
        out.pop(0)
    elif fair:
        half = fair.get("half_life")
        if not fair.get("enabled"):
            out.append("fair share is off ([scheduling] fairshare = false): the policy's order")
        else:
            life = "never" if half is None else f"every {format_duration(half)}"
            out.append(f"usage halves {life}; the user with the least usage per share starts first")
    return "".join(line + "\n" for line in out)


def _json(fields: dict[str, Any]) -> None:
    """The daemon's answer as it sent it, without its ``"ok":true``: ``{"daemon": {...},
    "jobs": [...]}``, written out without being decoded and encoded again (a long queue costs
    the client a copy, not a parse)."""
    with Client() as c:
        c.send("queue", **fields)
        raw = c.receive_raw()
    head = b'{"ok":true,'
    if raw.startswith(head) and raw.endswith(b"}"):
        body = b"{" + raw[len(head) :]
    else:  # some other layout: decode it after all
        reply = json.loads(raw)
        reply.pop("ok", None)
        body = json.dumps(reply, separators=(",", ":")).encode()
    sys.stdout.flush()
    sys.stdout.buffer.write(body + b"\n")
