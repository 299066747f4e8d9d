"""Examples:

berth hold 12 13        # keep pending jobs from starting
berth release-job 12    # let them start again
"""

from __future__ import annotations

import json
import sys

from berth.client import call

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_ids", type=int, nargs="+", help="the jobs")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    releasing = getattr(args, "command", "hold") == "release-job"
    reply = call("release" if releasing else "hold", job_ids=args.job_ids)
    if args.json:
        sys.stdout.write(json.dumps(reply) + "\n")
    else:
        verb = "released" if releasing else "held"
        for job_id in reply["job_ids"]:
            sys.stdout.write(f"job {job_id} {verb}\n")
    return 0
