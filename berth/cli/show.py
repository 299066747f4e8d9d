"""Examples:

berth show 12          # everything about job 12: request, state, attempts, history
berth show 12_3        # task 3 of array 12
berth show 12 --json

Anyone may look at any job. A daemon started with --private shows another user's command,
directory and log paths only to admins (the fields read "(private)"). On Slurm (--backend
slurm): what squeue/sacct say of the job, scontrol's record of it and berth's own (its logs
and batch script).
"""

from __future__ import annotations

import json
import sys
import time

from berth.cli import queue_starts
from berth.cli.backend_choice import of
from berth.cli.escape import shown
from berth.cli.job_ids import job_id
from berth.units import format_duration, format_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", type=job_id, help="the job (12), or an array's task (12_3)")
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


def _gpus(n: float, each: float = 1.0) -> str:
    if each < 1:
        return f"{each:g} of each of {n:g} GPUs"
    return f"{n:g} of a GPU" if n < 1 else f"{n:g} GPU{'s' if n != 1 else ''}"


def _by_memory(req: dict[str, Any]) -> str:
    """How --mem sized the request (mgpu_srun's habit), or nothing."""
    if req.get("each", 1.0) >= 1 or not req.get("mem"):
        return " (a share sized by --mem, as mgpu_srun placed jobs)"
    mib = req["mem"] / (1 << 20)
    return (f" ({mib:g} MiB of each of {req['gpus']:g} GPUs: shares sized by --mem, as "
            "mgpu_srun placed jobs)")  # fmt: skip


def _at_limit(j: dict[str, Any]) -> str:
    """What the limit does: requeue (mgpu_srun's context switch), how often; or nothing."""
    if not j.get("requeue"):
        return ""
    most = j.get("max_requeues")
    done = sum(1 for a in j.get("attempts") or () if a.get("outcome") == "PREEMPTED"
               and str(a.get("reason", "")).startswith("time limit"))  # fmt: skip
    left = "with no end" if most is None else f"{max(most - done, 0)} of {most} times left"
    return f"; then requeued at the end of the queue ({left})"


def _memory(j: dict[str, Any]) -> list[str]:
    """What its GPU memory was sized from, what it used, and --retry-oom's doing."""
    out = []
    learned = j.get("learned")  # (what sized it: a dict; "(private)" under --private)
    if learned:
        said = learned.get("said", "") if isinstance(learned, dict) else learned
        out.append(f"  memory:     {shown(said)}")
    if j.get("peak_mem"):
        out.append(f"  peak GPU memory: {j['peak_mem'] / (1 << 30):.1f} GiB (measured)")
    if j.get("retry_of") is not None:
        out.append(f"  retry of job {j['retry_of']}: {shown(j.get('retry_why') or '')}")
    if j.get("oom_retried"):
        out.append(f"  died of CUDA out of memory: retried as job {j['oom_retried']}")
    elif j.get("retry_oom") and j.get("state") in ("PENDING", "RUNNING", "COMPLETING"):
        out.append("  --retry-oom: queued once more with more memory if it dies of CUDA OOM")
    return out


def format_job(j: dict[str, Any]) -> str:
    req = j["request"]
    cmd = j["command"]
    lines = [
        f"Job {j['id']} ({shown(j['name'])}) of {shown(j['user'])}: {j['state']}"
        + (f" ({j['reason']})" if j.get("reason") else "")
        + (" [held]" if j.get("held") else ""),
        f"  command:    {shown(cmd if isinstance(cmd, str) else ' '.join(cmd))}",
        f"  directory:  {shown(j['cwd'])}",
        f"  request:    {_gpus(req['gpus'], req.get('each', 1.0))}"
        + (f", {format_size(req['mem'])} each" if req.get("mem") else "")
        + (f", only {req['gpu_ids']}" if req.get("gpu_ids") else "")
        + (f", prefer {req['prefer']}" if req.get("prefer") else "")
        + (_by_memory(req) if j.get("by_memory") else ""),
        f"  priority:   {j['priority']}",
        f"  time limit: {_limit(j)}{_at_limit(j)}",
        f"  submitted:  {_when(j['submit_time'])}",
        f"  stdout:     {shown(j['stdout'])}",
        f"  stderr:     {shown(j['stderr'])}",
    ]
    if j.get("state") == "PENDING":  # (the daemon's estimate, as `berth queue --start`)
        est = j.get("start_estimate")
        lines.insert(7, f"  starts:     {queue_starts.text(est, time.time())}")
        if (runs := queue_starts.runtime_text(est)) is not None:
            lines.insert(8, f"  runs:       {shown(runs)}")
    if j.get("request_source"):  # (a requirement table gave -g / --mem)
        lines.insert(4, f"              GPUs from {shown(j['request_source'])}")
    if j.get("array_job") is not None:
        spec = j.get("array_spec") or ""
        lines.append(
            f"  array:      task {j['array_task']} of array {j['array_job']}"
            + (f" ({spec})" if spec else "")
            + f"; it is {j['array_job']}_{j['array_task']}"
        )
    for key, what in (("project", "project"), ("inject_arg", "GPU ids in"), ("notify", "notify"),
                      ("mail_user", "mail"), ("mail_type", "mail when")):  # fmt: skip
        if j.get(key):
            lines.append(f"  {what + ':':<11} {shown(j[key])}")
    if j.get("resubmitted_from") is not None:
        lines.append(f"  resubmitted from job {j['resubmitted_from']}")
    lines += _memory(j)
    if j.get("dependency") or j.get("dependencies"):
        lines.append(f"  depends on: {j.get('dependency') or ','.join(j['dependencies'])}")
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
                + (f" ({shown(a['reason'])})" if a["reason"] else "")
            )
    lines.append("  history:")
    for e in j["history"]:
        lines.append(
            f"    {_when(e['at'])}  {e['state']}"
            + (f"  {shown(e['detail'])}" if e["detail"] else "")
        )
    return "\n".join(lines) + "\n"


def format_slurm(job: dict[str, Any]) -> str:
    """What the Slurm backend's ``show`` gives (berth.backends.slurm.Slurm.show)."""
    out = []
    recs = list(job["slurm"])

    def slurm(rec: dict[str, Any]) -> str:
        return "  slurm: " + " ".join(f"{k}={shown(v)}" for k, v in rec.items())

    for j in job["jobs"]:  # (an array's task: its own scontrol record under its line)
        native = f" ({j['native']})" if j["native"] != j["state"] else ""
        reason = f" ({j['reason']})" if j.get("reason") else ""
        code = f", exit code {j['exit_code']}" if j.get("exit_code") is not None else ""
        out.append(f"Job {j['id']} ({shown(j['name'])}) of {shown(j['user'])} on Slurm: "
                   f"{j['state']}{native}{reason}{code}")  # fmt: skip
        out.append(f"  gpus: {j['gpus'] or '-'}   where: {j['where'] or '-'}")
        raw = (j.get("extra") or {}).get("raw_id")
        out += [slurm(r) for r in recs if raw is not None and r.get("JobId") == raw]
        recs = [r for r in recs if raw is None or r.get("JobId") != raw]
    out += [slurm(r) for r in recs]
    rec = job.get("berth")
    if rec:
        out.append(f"  logs:   {shown(rec['stdout'])}" + ("" if rec["stderr"] == rec["stdout"]
                   else f" (errors: {shown(rec['stderr'])})"))  # fmt: skip
        out.append(f"  script: {rec.get('script', '-')}")
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    backend = of(args)
    job = backend.show(args.job_id)
    if args.json:
        sys.stdout.write(json.dumps(job) + "\n")
    elif backend.name == "slurm":
        sys.stdout.write(format_slurm(job))
    else:
        sys.stdout.write(format_job(job))
    return 0
