"""Examples:

  berth wait 12 13 14          # until all three have ended; exit 0 if all COMPLETED
  berth wait 12                # job 12, or every task of array 12
  berth wait 12_3              # task 3 of array 12
  berth wait --timeout 1h 12   # exit 6 if they have not all ended by then
  berth submit --parsable -- python a.py | xargs berth wait && echo done

Prints one line per job as it ends (`job 12: FAILED (exit code 3)`; --json: the job as the
backend reports it). The exit status is the outcome, the same on the local queue and on Slurm:
0 if every job COMPLETED, else that of the first one (in the order given) that did not: the
exit code of a job that FAILED (1..255), or 1 (CANCELLED, TIMEOUT, LOST...).
"""

from __future__ import annotations

import json
import sys
import time

from berth.backends.base import exit_status
from berth.cli.backend_choice import of
from berth.cli.job_ids import job_id
from berth.errors import EXIT_TIMEOUT, UsageError
from berth.units import parse_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from berth.backends.base import JobInfo


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "job_ids", type=job_id, nargs="+", metavar="ID", help="jobs (12) or tasks (12_3)"
    )
    p.add_argument("--timeout", help="give up after this long (90, 15m, 2h): exit 6")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing, only exit")
    p.add_argument("--json", action="store_true", help="one JSON row per job as it ends")


def deadline_of(args: argparse.Namespace) -> float | None:
    """When --timeout ends (time.monotonic()), or None without one."""
    if args.timeout is None:
        return None
    limit = parse_duration(args.timeout, what="--timeout")
    if not limit >= 0:
        raise UsageError(f"--timeout {args.timeout!r}: must not be negative")
    return time.monotonic() + limit


def run(args: argparse.Namespace) -> int:
    deadline = deadline_of(args)
    backend = of(args)
    status = 0
    backend.watch(args.job_ids)
    for ref in args.job_ids:
        left = float("inf") if deadline is None else max(0.0, deadline - time.monotonic())
        info = backend.wait(ref, left)
        if info is None:
            raise UsageError(f"no job {ref}: see `berth queue --all`")
        if not info.finished:
            if not args.quiet:
                sys.stderr.write(f"berth wait: job {ref} has not ended (--timeout)\n")
            return EXIT_TIMEOUT
        _say(args, ref, info)
        if status == 0:
            status = exit_status(info)
    return status


def _say(args: argparse.Namespace, ref: str, info: JobInfo) -> None:
    if args.quiet:
        return
    if args.json:
        sys.stdout.write(json.dumps(info.to_dict()) + "\n")
    else:
        code = info.exit_code
        sys.stdout.write(
            f"job {ref}: {info.state}" + (f" (exit code {code})" if code is not None else "")
            + "\n"
        )  # fmt: skip
    sys.stdout.flush()
