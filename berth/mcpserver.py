"""berth for a coding agent: its commands as tools of a Model Context Protocol server (stdio).

``berth mcp`` serves these tools to an agent on the same machine (Claude Code, an IDE...):

========================  ==============================================================
``gpu_status``            the GPUs, their processes and who holds them (``berth status``)
``select_gpus``           idle GPUs for a command, with why each other one was left out
``submit_job``            queue a command (or only check it: ``dry_run``)
``list_queue``            the queue, with pending reasons (``berth queue``)
``show_job``              one job in full (``berth show``)
``job_logs``              the last lines of a job's output (``berth logs -n``)
``cancel_job``            cancel a job, or send it a signal
``wait_job``              wait (bounded) until a job ends
``why_pending``           why a job waits and when it is predicted to start
========================  ==============================================================

Each tool runs the ``berth`` command itself, as the user who started the server, with the
command's ``--json`` output as its answer: the daemon learns who calls from the socket as
for any command, so an agent can do exactly what its user can, no more. An error is the
command's own message. Needs the optional ``mcp`` package (``pip install 'gpu-berth[mcp]'``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from berth import __version__
from berth.errors import EXIT_OK, EXIT_TIMEOUT, EXIT_UNSATISFIED

INSTRUCTIONS = (
    "berth shares this machine's GPUs between its users. Read gpu_status before choosing "
    "GPUs; queue long work with submit_job (check it first with dry_run=true) rather than "
    "running it on a GPU you picked; a job's ids, state and pending reason come from "
    "list_queue, show_job and why_pending. You act as your user: others' jobs are refused."
)
TIMEOUT = 120.0  # seconds any one berth command may take (wait_job adds its own wait)


def _run(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run ``berth ARGS`` as this user (its exit status is the caller's to read)."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "berth.cli.main", *args],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise ToolError(f"berth {' '.join(args)} did not answer in {timeout:g} s") from None


def berth(*args: str, timeout: float = TIMEOUT) -> str:
    """Run ``berth ARGS``; its stdout, or a ToolError with its message."""
    done = _run(*args, timeout=timeout)
    if done.returncode != 0:
        raise ToolError(
            done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}"
        )
    return done.stdout


def _json(*args: str, **kw: Any) -> Any:
    return json.loads(berth(*args, **kw))


def gpu_status() -> Any:
    """Every GPU: memory, utilisation, processes (user, memory, command), berth's claims and
    the daemon's jobs on it."""
    return _json("status", "--json")


def select_gpus(
    count: int = 1, min_free: str | None = None, name: str | None = None, max_procs: int = 0
) -> dict[str, Any]:
    """GPUs that qualify now (NVML ids, for CUDA_VISIBLE_DEVICES with
    CUDA_DEVICE_ORDER=PCI_BUS_ID) and why each other GPU does not. Nothing is claimed:
    prefer submit_job for anything that runs long."""
    args = ["select", "-n", str(count), "--explain", "--max-procs", str(max_procs)]
    args += [*(["--min-free", min_free] if min_free else []), *(["--name", name] if name else [])]
    done = _run(*args)
    if done.returncode not in (EXIT_OK, EXIT_UNSATISFIED):
        raise ToolError(done.stderr.strip())
    ids = [int(i) for i in done.stdout.strip().split(",") if i]
    return {"ok": done.returncode == 0, "gpus": ids, "explain": done.stderr.strip().splitlines()}


def submit_job(
    command: list[str],
    gpus: str = "1",
    mem: str | None = None,
    time: str | None = None,
    name: str | None = None,
    priority: int = 0,
    dependency: str | None = None,
    directory: str | None = None,
    dry_run: bool = False,
) -> Any:
    """Queue ``command`` (a list of words, never run by a shell) on ``gpus`` GPUs (a whole
    number, or a share below 1 such as "0.5" with ``mem`` such as "12G"). ``time`` as sbatch
    reads it (a bare number is minutes; "2:00:00"). ``dry_run`` runs every check the daemon
    runs and queues nothing. Answers the job id (or, dry, what the daemon would queue: the id
    it would get, GPUs, limits, logs, the number of variables exported, never their values)."""
    if not command:
        raise ToolError("submit_job: give the command as a list of words, e.g. ['python', 'x.py']")
    args = ["submit", "--json", "-g", gpus, "-p", str(priority)]
    for flag, value in (("--mem", mem), ("-t", time), ("-J", name), ("--dependency", dependency),
                        ("-D", directory)):  # fmt: skip
        if value is not None:
            args += [flag, value]
    if dry_run:
        args.append("--dry-run")
    return _json(*args, "--", *command)


def list_queue(all: bool = False, user: str | None = None) -> Any:
    """Queued and running jobs (``all``: also those that ended in the last day), each with
    state and pending reason."""
    args = ["queue", "--json", *(["--all"] if all else []), *(["-u", user] if user else [])]
    return _json(*args)


def show_job(job_id: str) -> Any:
    """One job in full: command, request, limits, attempts, history, log paths."""
    return _json("show", "--json", _id(job_id))


def job_logs(job_id: str, lines: int = 100, stderr: bool = False) -> Any:
    """The last ``lines`` lines of a job's output (``stderr``: of its -e file)."""
    if not 1 <= lines <= 10000:
        raise ToolError(f"lines={lines}: ask for 1 to 10000 lines")
    return _json("logs", "--json", "-n", str(lines), *(["--err"] if stderr else []), _id(job_id))


def cancel_job(job_id: str, signal: str | None = None) -> Any:
    """Cancel a job of yours (or only send it ``signal``, such as "USR1")."""
    return _json("cancel", "--json", *(["-s", signal] if signal else []), _id(job_id))


def wait_job(job_id: str, timeout_seconds: float = 60.0) -> dict[str, Any]:
    """Wait until the job ends, at most ``timeout_seconds`` (up to 3600); its end, or
    ``{"ended": false}`` when it is still going."""
    if not 0 < timeout_seconds <= 3600:
        raise ToolError(f"timeout_seconds={timeout_seconds}: give 0 to 3600 seconds")
    done = _run("wait", "--json", "--timeout", f"{timeout_seconds:g}s", _id(job_id),
                timeout=TIMEOUT + timeout_seconds)  # fmt: skip
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if not rows and done.returncode != EXIT_TIMEOUT:
        raise ToolError(done.stderr.strip() or f"exit status {done.returncode}")
    return {"ended": bool(rows), "jobs": rows}


def why_pending(job_id: str) -> dict[str, Any]:
    """Why a job has not started (its pending reason in plain words) and when it is
    predicted to start (from the queue's time limits), with the jobs ahead of it."""
    job = show_job(job_id)
    out: dict[str, Any] = {"id": job.get("id"), "state": job.get("state"),
                           "reason": job.get("reason")}  # fmt: skip
    if job.get("state") == "PENDING":
        start = _json("queue", "--start", "--json")
        rows = start.get("jobs", start) if isinstance(start, dict) else start
        mine = [r for r in rows if isinstance(r, dict) and str(r.get("id")) == str(job["id"])]
        out["prediction"] = mine[0] if mine else None
    return out


def _id(job_id: str) -> str:
    text = str(job_id).strip()
    head, _, task = text.partition("_")
    if not (text.isascii() and head.isdigit() and (not task or task.isdigit())):
        raise ToolError(f"job id {job_id!r}: expected a number such as 12 (or 12_3, a task)")
    return text


TOOLS = (gpu_status, select_gpus, submit_job, list_queue, show_job, job_logs, cancel_job,
         wait_job, why_pending)  # fmt: skip


def build() -> MCPServer:
    server: MCPServer = MCPServer(name="berth", version=__version__, instructions=INSTRUCTIONS)
    for tool in TOOLS:
        server.tool()(tool)
    return server


def serve() -> None:
    build().run("stdio")
