"""Examples:

berth cancel 12 13          # SIGTERM, then SIGKILL after the daemon's --kill-after grace
berth cancel 20             # array 20: every task (as scancel); 20_3: only task 3
berth cancel -s USR1 12     # only send a signal (to the job's whole process group)
berth cancel --all-mine     # every unfinished job of mine
berth cancel --all-mine --state PD   # only my pending ones

A job may be cancelled (or signalled) by its owner and by the admins (root, [claims]
admin_group); anyone else is refused, told whose job it is and who may. The same on Slurm
(--backend slurm: scancel). A job nobody knows is refused (exit 2) and nothing is cancelled;
one that has already ended is said to be so.
"""

from __future__ import annotations

import json
import os
import sys

from berth.backends.base import by_name
from berth.cli.backend_choice import of
from berth.cli.job_ids import job_id
from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "job_ids", type=job_id, nargs="*", help="the jobs (12), arrays (12) or tasks (12_3)"
    )
    p.add_argument("-s", "--signal", help="send this signal instead of cancelling (TERM, USR1, 9)")
    p.add_argument("--all-mine", action="store_true", help="all of my unfinished jobs")
    p.add_argument("--state", help="only jobs in these states (PD, R), comma-separated")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def parse_signal(text: str) -> int:
    import signal  # rare: -s

    if text.isdigit():
        n = int(text)
        top = int(getattr(signal, "SIGRTMAX", 64))
        if not 1 <= n <= top:
            raise UsageError(f"invalid signal {text!r}: signal numbers go from 1 to {top}")
        return n
    name = text.upper()
    if not name.startswith("SIG"):
        name = "SIG" + name
    try:  # (Signals only: not SIG_IGN, SIG_DFL, SIG_BLOCK..., which are ints too)
        return int(signal.Signals[name])
    except KeyError:
        raise UsageError(
            f"unknown signal {text!r}: use a name (TERM, KILL, USR1) or a number"
        ) from None


def run(args: argparse.Namespace) -> int:
    if not args.job_ids and not args.all_mine:
        raise UsageError("name the jobs to cancel, or use --all-mine")
    backend = of(args)
    sig = parse_signal(args.signal) if args.signal is not None else None
    states = [s for s in (args.state or "").split(",") if s.strip()]
    ids = list(dict.fromkeys(args.job_ids))
    if args.all_mine and not ids:  # one request where the backend has one (linear)
        done = backend.cancel_mine(states, sig)
    else:
        if args.all_mine:
            seen = set(ids)
            ids += [j.id for j in backend.list(user=_me()) if j.id not in seen]
        if states:  # an array's tasks in those states, each by its id
            wanted = set(ids)
            now = backend.list(finished=True, states=states)
            ids = [j.id for j in now if not wanted.isdisjoint(by_name([j]))]
        done = backend.cancel(ids, sig) if ids else {}
    if args.json:
        sys.stdout.write(json.dumps(done) + "\n")
    else:
        for job, what in done.items():
            sys.stdout.write(f"job {job}: {what}\n")
    return 0


def _me() -> str:
    import pwd  # rare: --all-mine

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())
