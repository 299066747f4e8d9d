"""Examples:

berth resubmit 12            # queue ended job 12 again: a new id, the same command, env, GPUs
berth resubmit 12 --cascade  # and the jobs cancelled because 12 failed (afterok:12), rewired

The new job has the old one's spec as stored: command, environment, directory, GPUs, limits,
log patterns, user (with what `berth update` changed on it), and `berth show` says
"resubmitted from: 12". It keeps its dependencies on jobs that have not ended; those on
ended jobs are dropped. Its owner or an admin may resubmit a job (an admin's resubmission
still runs as its owner). With --cascade, the jobs that ended FAILED or CANCELLED
(DependencyNeverSatisfied) depending on it, and theirs, are queued again too, in dependency
order, each dependency moved onto the new ids; only those you may act on (the others are
named). Array tasks are not resubmitted one by one yet: submit the array again.
"""

from __future__ import annotations

import json
import sys

from berth.cli.backend_choice import chosen
from berth.cli.job_ids import job_id, job_ref
from berth.client import call
from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", type=job_id, help="the ended job (12)")
    p.add_argument(
        "--cascade", action="store_true",
        help="also its dependents that failed or were cancelled because of it",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--backend", help="local (the berth daemon); not slurm")


def run(args: argparse.Namespace) -> int:
    if chosen(args) == "slurm":
        raise UsageError(
            "berth resubmit is for the local queue; on Slurm, `scontrol requeue ID` queues an "
            "ended batch job again, or submit it again with `berth submit --backend slurm`"
        )
    reply = call("resubmit", job_id=job_ref(args.job_id), cascade=args.cascade)
    if args.json:
        sys.stdout.write(json.dumps(reply) + "\n")
        return 0
    for old, new in reply["jobs"].items():
        sys.stdout.write(f"job {old} resubmitted as job {new}\n")
    for what in reply.get("skipped") or ():
        sys.stdout.write(f"not resubmitted: job {what}\n")
    return 0
