"""Examples:

  berth wait 12 13 14          # until all three have ended; exit 0 if all COMPLETED
  berth wait 12                # job 12, or every task of array 12
  berth wait 12_3              # task 3 of array 12
  berth wait --timeout 1h 12   # exit 6 if they have not all ended by then
  berth submit --parsable -- python a.py | xargs berth wait && echo done

Prints one line per job as it ends (`job 12: COMPLETED (exit code 0)`; --json: the job's row).
The exit status is the outcome: 0 if every job COMPLETED, else that of the first one (in the
order given) that did not: its exit code (1..255), or 1 (cancelled, timed out, lost...).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from berth.cli.job_ids import job_ref
from berth.client import Client
from berth.errors import EXIT_TIMEOUT, UsageError
from berth.units import parse_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "job_ids", type=job_ref, nargs="+", metavar="ID", help="jobs (12) or tasks (12_3)"
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
    status = 0
    with Client() as c:
        c.settimeout(None)
        for ref in args.job_ids:
            row = _wait(c, ref, deadline)
            if row is None:
                if not args.quiet:
                    sys.stderr.write(f"berth wait: job {ref} has not ended (--timeout)\n")
                return EXIT_TIMEOUT
            _say(args, ref, row)
            if status == 0 and row["state"] != "COMPLETED":
                code = row.get("exit_code")
                status = code if isinstance(code, int) and 0 < code < 256 else 1
    return status


def _wait(c: Any, ref: int | str, deadline: float | None) -> dict[str, Any] | None:
    """The job's row once it has ended, or None at the deadline."""
    while True:
        left = 3600.0 if deadline is None else max(0.0, deadline - time.monotonic())
        reply = c.call("wait", job_id=ref, timeout=min(left, 3600.0))
        if reply["finished"]:
            row: dict[str, Any] = reply["job"]
            return row
        if deadline is not None and time.monotonic() >= deadline:
            return None


def _say(args: argparse.Namespace, ref: int | str, row: dict[str, Any]) -> None:
    if args.quiet:
        return
    if args.json:
        sys.stdout.write(json.dumps(row) + "\n")
    else:
        code = row.get("exit_code")
        sys.stdout.write(
            f"job {ref}: {row['state']}" + (f" (exit code {code})" if code is not None else "")
            + "\n"
        )  # fmt: skip
    sys.stdout.flush()
