"""Examples:

berth show 12          # everything about job 12: request, state, attempts, history
berth show 12_3        # task 3 of array 12
berth show 12 --json

Anyone may look at any job. A daemon started with --private shows another user's command,
directory and log paths only to admins (the fields read "(private)").
"""

from __future__ import annotations

import json
import sys
import time

from berth.cli import starts
from berth.cli.queue import shown
from berth.client import call
from berth.units import format_duration, format_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", type=int, help="the job")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _when(t: float | None) -> str:
    if t is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _limit(j: dict[str, Any]) -> str:
    """The limit in force, and where it comes from (the job's -t or the daemon's maximum)."""

    def shown(t: float) -> str:  # a limit under a minute may be a fraction
        return f"{t:g}s" if t < 60 and t != int(t) else format_duration(t)

    own: float | None = j.get("time_limit")
    most: float | None = j.get("max_job_time")
    if most and (not own or most < own):  # (-t above it: asked before the maximum was lowered)
        asked = f"the job asked for {shown(own)}" if own else "the job gave no -t"
        return f"{shown(most)} (the daemon's --max-job-time; {asked})"
    if not own:
        return "none"
    return shown(own) + (f" (the daemon allows up to {shown(most)})" if most else "")


def format_job(j: dict[str, Any]) -> str:
    req = j["request"]
    cmd = j["command"]
    lines = [
        f"Job {j['id']} ({shown(j['name'])}) of {shown(j['user'])}: {j['state']}"
        + (f" ({j['reason']})" if j.get("reason") else "")
        + (" [held]" if j.get("held") else ""),
        f"  command:    {shown(cmd if isinstance(cmd, str) else ' '.join(cmd))}",
        f"  directory:  {shown(j['cwd'])}",
        f"  request:    {req['gpus']} GPU(s)"
        + (f", {format_size(req['mem'])} each" if req.get("mem") else "")
        + (f", only {req['gpu_ids']}" if req.get("gpu_ids") else "")
        + (f", prefer {req['prefer']}" if req.get("prefer") else ""),
        f"  priority:   {j['priority']}",
        f"  time limit: {_limit(j)}",
        f"  submitted:  {_when(j['submit_time'])}",
        f"  stdout:     {shown(j['stdout'])}",
        f"  stderr:     {shown(j['stderr'])}",
    ]
    if j.get("state") == "PENDING":  # (the daemon's estimate, as `berth queue --start`)
        lines.insert(7, f"  starts:     {starts.text(j.get('start_estimate'), time.time())}")
    if j.get("request_source"):  # (a requirement table gave -g / --mem)
        lines.insert(4, f"              GPUs from {shown(j['request_source'])}")
    if j.get("array_job") is not None:
        spec = j.get("array_spec") or ""
        lines.append(
            f"  array:      task {j['array_task']} of array {j['array_job']}"
            + (f" ({spec})" if spec else "")
            + f"; it is {j['array_job']}_{j['array_task']}"
        )
    for key, what in (("inject_arg", "GPU ids in"), ("notify", "notify"), ("mail_user", "mail")):
        if j.get(key):
            lines.append(f"  {what + ':':<11} {shown(j[key])}")
    if j.get("dependencies"):
        lines.append(f"  depends on: {', '.join(j['dependencies'])}")
    if j.get("retries"):
        lines.append(f"  retries:    {j['retries']}")
    if j.get("exit_code") is not None:
        lines.append(f"  exit code:  {j['exit_code']}")
    if j["attempts"]:
        lines.append("  attempts:")
        for a in j["attempts"]:
            end = a["end"]
            took = format_duration(end - a["start"]) if end else "running"
            gpus = ",".join(str(g) for g in a["gpus"])
            lines.append(
                f"    #{a['number']} on GPU {gpus} from {_when(a['start'])} ({took}): "
                f"{a['outcome'] or 'RUNNING'}"
                + (f" exit {a['exit_code']}" if a["exit_code"] is not None else "")
                + (f" ({a['reason']})" if a["reason"] else "")
            )
    lines.append("  history:")
    for e in j["history"]:
        lines.append(
            f"    {_when(e['at'])}  {e['state']}" + (f"  {e['detail']}" if e["detail"] else "")
        )
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    job = call("show", job_id=args.job_id)["job"]
    if args.json:
        sys.stdout.write(json.dumps(job) + "\n")
    else:
        sys.stdout.write(format_job(job))
    return 0
