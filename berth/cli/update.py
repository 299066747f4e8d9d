"""Examples:

berth update 12 -g 2                    # ask for 2 GPUs instead
berth update 12 -t 90                   # time limit 90 minutes (as sbatch: a bare number is minutes)
berth update 12 -p 5 -J eval            # priority 5, name "eval"
berth update 12 --dependency afterok:10 # wait for job 10 instead (--dependency '': for nothing)
berth update 12_3 -t 2:00:00            # only task 3 of array 12 (12: all its pending tasks)
berth update --backend slurm 4711 -g 1  # on Slurm: scontrol update JobId=4711 Gres=gpu:1

Only a pending job can be changed (held, or waiting for its --begin time, too): a running one
keeps what it started with. Its owner or an admin may change it; a priority above the highest
of the user's own queued jobs is for admins. Each value is checked as `berth submit` checks it:
a request no GPU here could ever meet (-g 9 on an 8-GPU machine), a -t above the daemon's
--max-job-time or the user's limits are refused, and nothing is changed. Every change is a line
of the job's history, `updated: gpus 1 -> 2 by alice`, which `berth show` prints with its time.

On Slurm (--backend slurm, $BERTH_BACKEND, [queue] backend): scontrol update JobId=ID with
Gres=gpu:N, TimeLimit, Nice=-P (as submit's -p: raising it is for Slurm operators), Name,
Dependency=EXPR (@ made your last job submitted with berth).
"""

from __future__ import annotations

import json
import sys

from berth.cli.backend_choice import chosen, of
from berth.cli.job_ids import job_id, job_ref
from berth.cli.submit import gpu_number
from berth.cli.submit_options import time_limit
from berth.client import call
from berth.dependency import parse_dependency
from berth.errors import UsageError
from berth.wire.jobspec import check_field
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", type=job_id, help="the job (12), or an array's task (12_3)")
    p.add_argument("-g", "--gpus", help="GPUs: an integer, or a fraction below 1 (0.5)")
    p.add_argument(
        "-t", "--time", dest="time",
        help="time limit as sbatch reads it: a bare number is MINUTES; also MM:SS, H:MM:SS, "
        "D-HH[:MM[:SS]], or 90s, 15m, 2h",
    )  # fmt: skip
    p.add_argument("-p", "--priority", type=int, help="higher runs first")
    p.add_argument("-J", "--job-name", help="the job's name")
    p.add_argument(
        "--dependency", metavar="EXPR",
        help="the job's dependency instead of its own, as submit's (afterok:12:13, "
        "afterany:12?afterok:13, singleton, @); '' for none",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--backend", help="local (the berth daemon) or slurm")


CPU_ONLY = (
    "-g 0: a pending job keeps GPUs or none as it was submitted (a CPU-only job runs "
    "differently); cancel it and submit it again with the -g you want"
)


def changes(args: argparse.Namespace) -> dict[str, Any]:
    """What to change, checked as submit checks each (the job spec's own field checks)."""
    out: dict[str, Any] = {}
    try:
        if args.gpus is not None:
            out["gpus"] = check_field("gpus", gpu_number(args.gpus))
            out["gpus"] = int(out["gpus"]) if float(out["gpus"]).is_integer() else out["gpus"]
            if out["gpus"] == 0:  # (the spec takes 0 at submit: how the job runs differs)
                raise UsageError(CPU_ONLY)
        limit = time_limit(args)
        if limit is not None:
            out["time_limit"] = check_field("time_limit", limit)
        if args.priority is not None:
            out["priority"] = check_field("priority", args.priority)
    except ProtocolError as e:
        raise UsageError(e.message) from None
    if args.job_name is not None:
        if not args.job_name:
            raise UsageError("-J '': give the job a name")
        out["name"] = args.job_name
    if args.dependency is not None:
        text = args.dependency.strip()
        out["dependency"] = "" if text in ("", "none") else str(parse_dependency(text))
    if not out:
        raise UsageError("berth update: nothing to change: give -g, -t, -p, -J or --dependency")
    return out


def run(args: argparse.Namespace) -> int:
    fields = changes(args)
    if chosen(args) == "slurm":
        from berth.backends.slurm import Slurm  # rare: Slurm
        from berth.backends.slurm_update import update  # rare: as Slurm

        backend = of(args)
        assert isinstance(backend, Slurm)
        reply: dict[str, Any] = {"job_id": args.job_id, "changed": update(backend, args.job_id,
                                                                         fields)}  # fmt: skip
    else:
        reply = call("update", job_id=job_ref(args.job_id), set=fields)
    if args.json:
        sys.stdout.write(json.dumps(reply) + "\n")
        return 0
    for job, said in reply["changed"].items():
        if not said:
            sys.stdout.write(f"job {job}: nothing to change (it already has those values)\n")
        for line in said:
            sys.stdout.write(f"job {job}: {line}\n")
    if reply.get("unsaved"):  # (a full state disk: done, not yet durable)
        sys.stderr.write(f"berth: warning: {reply['unsaved']}\n")
    return 0
