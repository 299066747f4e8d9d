"""Examples:

berth hold 12 13        # keep pending jobs from starting
berth release-job 12    # let them start again
berth hold --backend slurm 12   # on Slurm: scontrol hold / scontrol release

The backend is chosen as for the queue commands (--backend, $BERTH_BACKEND, [queue] backend).
"""

from __future__ import annotations

import json
import sys

from berth.cli.backend_choice import chosen, of
from berth.cli.job_ids import job_id, job_ref
from berth.client import call
from berth.errors import UsageError
from berth.units import parse_begin

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_ids", type=job_id, nargs="+", help="the jobs (12, or 12_3 on Slurm)")
    p.add_argument(
        "--at", metavar="TIME",
        help="release-job: let it start only from TIME (as --begin: now+2h, 14:00, "
        "2026-12-01T09:00)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--backend", help="local (the berth daemon) or slurm")


def run(args: argparse.Namespace) -> int:
    releasing = getattr(args, "command", "hold") == "release-job"
    if chosen(args) == "slurm":
        from berth.backends.slurm import Slurm  # rare: Slurm

        backend = of(args)
        assert isinstance(backend, Slurm)
        reply: dict[str, Any] = {"job_ids": list(backend.hold(args.job_ids, release=releasing))}
    else:
        fields: dict[str, Any] = {"job_ids": [job_ref(i) for i in args.job_ids]}
        if args.at:
            if not releasing:
                raise UsageError("--at is for `berth release-job` (when the job may start)")
            import time  # rare: --at

            fields["at"] = parse_begin(args.at, time.time(), what="--at")
        reply = call("release_job" if releasing else "hold", **fields)
    if args.json:
        sys.stdout.write(json.dumps(reply) + "\n")
    else:
        verb = "released" if releasing else "held"
        for job in reply["job_ids"]:
            sys.stdout.write(f"job {job} {verb}\n")
    if reply.get("unsaved"):  # (a full state disk: done, not yet durable)
        sys.stderr.write(f"berth: warning: {reply['unsaved']}\n")
    return 0
