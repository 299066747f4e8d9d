"""Examples:

  berth queue                 # running and pending jobs of everyone
  berth queue -u alice        # only alice's
  berth queue -t PD           # only pending (states: PD R CG CD F CA TO PR LO, or full names)
  berth queue --all           # also jobs that ended in the last day
  berth queue --start         # when will pending jobs start? (as berth show and the dashboard)
  berth queue --users         # each user: running, pending, decayed usage, fair-share factor
  berth queue --project vision  # only the jobs of project vision (--project, Slurm's -A)
  berth queue --json          # {"daemon": {...}, "jobs": [...], "users": [...]}
  berth queue -n 50           # the first 50 lines (-n 0 / --limit 0: all)
  berth queue --noheader      # no header lines (as squeue)
  berth queue -r              # an array's pending tasks one per line (default: 12_[3-9%2])
  berth queue --pty           # jobs with a terminal (--pty): `berth attach ID` shows its screen
  berth queue --tree          # jobs under the jobs they depend on (--dependency), with states
  berth queue -j 12,13 --me   # as squeue: these jobs (any state), mine; -p gpu, -o "%i %j %T"

On a terminal, berth queue shows a screenful and then a line that counts the rest (`99,950
more pending (berth queue --limit 0 or | less for all)`); to a pipe or a file, and with
--all, --json, --tree, --pty or -n/--limit, it lists every job, as squeue does.

The first line says which daemon answered: the system one (every user's, docs/admin.md) or
a user's own (see `berth help daemon`). Everyone sees every job (user, name, state, GPUs);
a daemon started with --private shows others' commands and paths to admins only.

Columns as Slurm's squeue: JOBID NAME USER ST TIME GPUS NODELIST(REASON) (GPUS 2x0.098: that
share of each of 2 GPUs, as `--gpu-ids 0,1 --mem 8000` asks). NODELIST names the
GPUs a running job holds (gpu:0,1); a pending job shows why it waits: (Resources), (Priority),
(Dependency), (Held), (GpuPaused), (GpuUnhealthy) for a lost GPU, (BeginTime) after a failed
attempt, (UserGpuLimit) when its user holds all the GPUs they may (`berth admin limits`),
(ProjectGpuLimit) when its project's jobs hold all the GPUs the project may (max_gpus),
(JobArrayTaskLimit) for an array's task held back by its %K, (Reservation) when it would
start but for GPUs an admin reserved for others (a line under the table says which, for whom
and when; `berth show ID` says why in words: the window is open, or its time limit would run
into it). An array's tasks show as ID_TASK,
its pending ones folded into one line (12_[3-9%2]: tasks 3 to 9 wait, at most 2 run at once)
unless -r/--expand. --tree draws each job under the first listed job it depends on, with its
dependency as written (`afterok:12:13`) and the states of the ended jobs it names.
Unprintable characters in names are shown escaped (\\xff); --json is the daemon's JSON as it
sent it: "daemon" (pid, socket, system, user, private, admins), "jobs" (each with its
"dependency" as written and the ids it "depends_on"), "dependency_states", "users" and
"fairshare".

On Slurm (--backend slurm) the same table with squeue's PARTITION and NODES columns, -u, -t,
--all, -r and --noheader, from squeue (and sacct, where the cluster keeps accounting, for
--all); the GPUs column is what each job asked (a fraction for Slurm's shards), ST `NF` a job
whose node failed (LOST). --json is then a list of rows of the local queue's shape (Slurm's own fields
after them); --start,
--users, --pty and --tree are the local daemon's.

As squeue, on both backends: -j 12,13 (those jobs, in any state), --me (mine), -o FORMAT
(`-o "%.8i %P %j %t %D %R"`: squeue's fields %i %A %F %K %j %u %t %T %M %D %P %R %N %r %b,
widths as squeue); -p/--partition NAMES (Slurm's partitions; the local queue has none).

When more than one user has jobs, a block under the table gives each user's running jobs and
GPUs, pending jobs, usage (GPU-hours, decayed: docs/scheduling.md), its part of everyone's
usage, and the fair-share factor (Slurm's 2^(-usage/share): 1 = has used nothing, 0.5 = its
share, lower = more; the highest goes first), and the most GPUs they may hold. With
projects (docs/admin.md "Projects"), --users also gives each project's line (as `berth admin
projects`): projects come first in fair share, then users within one; so does the block
under the table when more than one project has jobs.
"""

from __future__ import annotations

import argparse
import os
import pwd
import sys
import time

from berth.cli import queue_limit, queue_squeue
from berth.cli.backend_choice import of
from berth.cli.escape import shown
from berth.cli.queue_rows import format_rows
from berth.errors import UsageError
from berth.units import format_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.backends.base import JobInfo

    Row = list[Any]  # [the id as shown, its JobInfo]


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
    p.add_argument(
        "--tree", action="store_true", help="jobs as a tree of their dependencies, with states"
    )
    p.add_argument("-A", "--project", "--account", dest="project", metavar="NAME",
                   help="only the jobs of this project (`berth admin projects` lists them)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="machine-readable output")
    queue_limit.add_argument(p)
    queue_squeue.add_arguments(p)




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


def fold(rows: list[JobInfo], expand: bool = False) -> list[Row]:
    """Rows as shown: an array's task as ``12_3``, and its pending tasks in one row,
    ``12_[3-9%2]`` (unless ``expand``), where its first pending task was."""
    out: list[Row] = []
    pending: dict[str, tuple[Row, list[int]]] = {}
    for r in rows:
        array = r.array_job
        if array is None or r.array_task is None or expand or r.state != "PENDING":
            out.append([r.id, r])
            continue
        if array not in pending:
            pending[array] = ([r.id, r], [])
            out.append(pending[array][0])
            folded = r.extra.get("array_tasks")  # (the daemon folded them: all here)
            if folded:
                pending[array][1].extend(folded)
                continue
        pending[array][1].append(r.array_task)
    for array, (first, tasks) in pending.items():
        limit = first[1].array_limit
        inside = compact(tasks) + (f"%{limit}" if limit else "")
        one = len(tasks) == 1 and not limit
        first[0] = f"{array}_{tasks[0]}" if one else f"{array}_[{inside}]"
    return out


LOCAL_ONLY = {
    "start": "--start: not on Slurm; `squeue --start` gives Slurm's own estimate",
    "users": "--users: not on Slurm; `sshare` gives Slurm's fair share",
    "pty": "--pty: not on Slurm (its jobs have no terminal to attach to)",
    "tree": "--tree: not on Slurm; `squeue -o '%i %j %T %E'` lists each job's dependency",
    "project": "--project: not on Slurm here; `squeue -A NAME` lists an account's jobs",
}


def run(args: argparse.Namespace) -> int:
    backend = of(args)
    if backend.name != "local":
        for opt, why in LOCAL_ONLY.items():
            if getattr(args, opt):
                raise UsageError(why)
    queue_squeue.prepare(args, backend.name)
    if args.start:  # as squeue --start: the daemon's estimates
        from berth.cli import queue_starts  # rare: --start

        if args.user or args.states or args.all:
            raise UsageError("--start predicts every pending job: not with -u, -t or --all")
        return queue_starts.run(args.json)
    states = [s for s in (args.states or "").split(",") if s.strip()]
    width = None if args.json else queue_limit.width()

    def write(text: str) -> None:  # (on a terminal: no line wider than it)
        sys.stdout.write(queue_limit.cut(text, width))
    if args.json:
        queue_limit.write_json(backend, args, states)
        return 0
    limit = queue_limit.limit(args)
    lines = getattr(backend, "lines", None)  # the local daemon's: the head, folded
    if lines is not None:
        folds = not (args.expand or args.tree or args.pty)
        rows = lines(user=args.user, finished=args.all, states=states, limit=limit,
                     project=args.project, fold=folds)  # fmt: skip
    else:
        rows = backend.list(user=args.user, finished=args.all, states=states)
    rows = queue_squeue.keep(rows, args)[:limit]
    about: dict[str, Any] = getattr(backend, "about", {})  # the local daemon's: who, users
    header = not args.noheader
    if header and about.get("daemon"):
        write(which_daemon(about["daemon"]) + "\n")
    users = about.get("users") or []
    if args.users:
        write(format_users(users, about.get("fairshare") or {}, header))
        if about.get("projects"):
            write("\n" + format_projects(about["projects"], header))
        return 0
    if args.pty:
        return _ptys(rows, header, width)
    if args.tree:
        from berth.cli.queue_tree import format_tree  # rare: --tree

        write(format_tree(rows, about.get("dependency_states") or {}, header))
        return 0
    if args.format is not None:
        sys.stdout.write(queue_squeue.render(fold(rows, args.expand), args.format, header))
        return 0
    write(format_rows(fold(rows, args.expand), header, width, slurm=backend.name == "slurm"))
    write(queue_limit.more(about.get("left") or {}))
    if about.get("reservations") and header:
        write(format_reservations(about["reservations"]))
    if sum(1 for u in users if u["running"] or u["pending"]) > 1 and not args.user:
        write("\n" + format_users(users, about.get("fairshare") or {}, header))
    projects = about.get("projects") or []
    if sum(1 for p in projects if p["running"] or p["pending"]) > 1 and not args.project:
        write("\n" + format_projects(projects, header))
    return 0


def format_reservations(rows: list[dict[str, Any]]) -> str:
    """The admin reservations, under the table: the jobs that wait as (Reservation) wait for
    these (`berth admin reservations` has a timeline)."""
    from berth.cli.admin_reserve import line  # rare: reservations

    now = time.time()
    return "\nreserved GPUs (others' jobs wait as (Reservation)):\n" + "".join(
        "  reservation " + line(r, now) + "\n" for r in rows
    )


def _ptys(rows: list[JobInfo], header: bool, width: int | None) -> int:
    """The GPU Job Scheduler's `screens`: the running jobs that have a terminal, and how to see it."""
    rows = [r for r in rows if r.extra.get("pty") and r.state in ("RUNNING", "COMPLETING")]
    shown_rows = fold(rows, expand=True)
    sys.stdout.write(format_rows(shown_rows, header, width))
    if header and rows:
        sys.stdout.write(queue_limit.cut(
            f"`berth attach {rows[0].id}` shows a job's screen as it is now and lets you "
            "type into it (Ctrl-] detaches)\n", width
        ))  # fmt: skip
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


def format_projects(rows: list[dict[str, Any]], header: bool = True) -> str:
    """Each project's line: running jobs, GPUs held (of its max_gpus), jobs queued or running
    (of its max_queued), decayed usage, its part of all, the fair-share factor between
    projects (its shares), who may charge it."""

    def of(n: Any, most: Any) -> str:
        return f"{n:g}" + ("" if most is None else f"/{most:g}")

    lines = [("PROJECT", "RUNNING", "GPUS", "QUEUED", "USAGE(GPU-h)", "USE%", "FAIRSHARE",
              "MEMBERS")]  # fmt: skip
    for p in rows:
        members = [*p.get("users", []), *(f"@{g}" for g in p.get("groups", []))]
        lines.append((
            shown(p["project"])[:20], str(p["running"]), of(p["gpus"], p.get("max_gpus")),
            of(p["queued"], p.get("max_queued")), f"{p['usage_gpu_hours']:.2f}",
            f"{100 * p['usage_fraction']:.0f}%",
            f"{p['factor']:.2f}" + ("" if p.get("shares", 1.0) == 1.0 else f" (x{p['shares']:g})"),
            shown(",".join(members))[:40] if members else "everyone",
        ))  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = [
        " ".join(c.ljust(w) if i in (0, 7) else c.rjust(w)
                 for i, (c, w) in enumerate(zip(line, widths, strict=True))).rstrip()
        for line in lines
    ]  # fmt: skip
    if not header:
        out.pop(0)
    else:
        out.append("GPUS and QUEUED: held / the project's max_gpus, max_queued (docs/admin.md)")
    return "".join(line + "\n" for line in out)
