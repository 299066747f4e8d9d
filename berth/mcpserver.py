"""berth for a coding agent: its commands as tools of a Model Context Protocol server (stdio).

``berth mcp`` serves these tools to an agent on the same machine (Claude Code, an IDE...):

========================  ==============================================================
``gpu_status``            the GPUs, their processes and who holds them (``berth status``)
``select_gpus``           idle GPUs for a command, with why each other one was left out
``submit_job``            queue a command (or only check it: ``dry_run``)
``list_queue``            a summary of the queue and its first jobs, filtered by state and
                          user (``berth queue``)
``show_job``              one job in full (``berth show``)
``job_logs``              the last lines of a job's output (``berth logs -n``)
``cancel_job``            cancel a job, or send it a signal
``hold_job``              keep pending jobs from starting (``berth hold``)
``release_job``           let held jobs start (``berth release-job``)
``update_job``            change a pending job (``berth update``)
``wait_job``              wait (bounded; 0: only look) until a job ends
``why_pending``           why a job waits, when it is predicted to start, the jobs ahead
``recent_failures``       what this user's last failed jobs said: state, exit, log's tail
========================  ==============================================================

Each tool runs the ``berth`` command itself, as the user who started the server, with the
command's ``--json`` output as its answer: the daemon learns who calls from the socket as
for any command, so an agent can do exactly what its user can, no more. An error is the
command's own message. The tools that change nothing say so (``readOnlyHint``); every
parameter has a description. A job's id is written as the CLI writes it (``9_1``: task 1 of
array 9). Needs the optional ``mcp`` package (``pip install 'gpu-berth[mcp]'``).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from berth import __version__
from berth.cli.queue_starts import runtime_text, text
from berth.errors import EXIT_OK, EXIT_TIMEOUT, EXIT_UNSATISFIED

INSTRUCTIONS = (
    "berth shares this machine's GPUs between its users. Read gpu_status before choosing "
    "GPUs; queue long work with submit_job (check it first with dry_run=true) rather than "
    "running it on a GPU you picked; a job's ids, state and pending reason come from "
    "list_queue (a summary and the first jobs: filter by state and user), show_job and "
    "why_pending; recent_failures says what your last failed jobs printed. You act as your "
    "user: others' jobs are refused."
)
TIMEOUT = 120.0  # seconds any one berth command may take (wait_job adds its own wait)
# a list_queue row: what an agent decides on
ROW_KEYS = ("id", "name", "user", "state", "gpus", "reason", "time", "exit_code", "nodelist",
            "priority")  # fmt: skip
FAILED = "FAILED,TIMEOUT,LOST"

JobId = Annotated[str, Field(description="a job id as berth prints it: 12, or 12_3 (task 3 "
                             "of array 12)")]  # fmt: skip


def _run(*args: str, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``berth ARGS`` as this user (its exit status is the caller's to read), killed past
    ``timeout`` (default :data:`TIMEOUT`): the CLI waits on a daemon as long as it takes."""
    timeout = TIMEOUT if timeout is None else timeout
    try:
        return subprocess.run(
            [sys.executable, "-m", "berth.cli.main", *args],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise ToolError(f"berth {' '.join(args)} did not answer in {timeout:g} s") from None


def berth(*args: str, timeout: float | None = None) -> str:
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
    count: Annotated[int, Field(description="how many GPUs", ge=1)] = 1,
    min_free: Annotated[str | None, Field(description='free memory each needs, e.g. "20G"')] = None,
    name: Annotated[str | None, Field(description='only GPUs whose model name has this, '
                                      'e.g. "A100"')] = None,
    max_procs: Annotated[int, Field(description="at most this many processes on each", ge=0)] = 0,
) -> dict[str, Any]:  # fmt: skip
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


Gpus = Annotated[float, Field(description="GPUs: a whole number (2), or a share of one GPU "
                              "below 1 (0.5; give mem too)", gt=0)]  # fmt: skip
Time = Annotated[str | None, Field(description='time limit as sbatch reads it: a bare number '
                                   'is minutes; "2:00:00", "90m"')]  # fmt: skip
Priority = Annotated[int | None, Field(description="higher runs first (above your own highest "
                                       "queued job's: admins only)")]  # fmt: skip
Name = Annotated[str | None, Field(description="the job's name")]
Dependency = Annotated[str | None, Field(description='start only after other jobs, e.g. '
                                         '"afterok:12:13", "afterany:12"')]  # fmt: skip


def submit_job(
    command: Annotated[list[str], Field(description="the command as a list of words, never "
                                        "run by a shell, e.g. ['python', 'train.py']")],
    gpus: Gpus = 1,
    mem: Annotated[str | None, Field(description='GPU memory per GPU, e.g. "12G"')] = None,
    time: Time = None,
    name: Name = None,
    priority: Annotated[int, Field(description="higher runs first")] = 0,
    dependency: Dependency = None,
    directory: Annotated[str | None, Field(description="working directory (default: the "
                                           "server's)")] = None,
    dry_run: Annotated[bool, Field(description="only check: every check the daemon runs, "
                                   "nothing queued")] = False,
) -> Any:  # fmt: skip
    """Queue ``command`` on ``gpus`` GPUs. Answers the job id (or, dry, what the daemon
    would queue: the id it would get, GPUs, limits, logs, the number of variables exported,
    never their values)."""
    if not command:
        raise ToolError("submit_job: give the command as a list of words, e.g. ['python', 'x.py']")
    args = ["submit", "--json", "-g", _gpus(gpus), "-p", str(priority)]
    for flag, value in (("--mem", mem), ("-t", time), ("-J", name), ("--dependency", dependency),
                        ("-D", directory)):  # fmt: skip
        if value is not None:
            args += [flag, value]
    if dry_run:
        args.append("--dry-run")
    return _json(*args, "--", *command)


def _gpus(gpus: float) -> str:
    """A GPU count as the CLI reads it: 2 (not 2.0), 0.5."""
    return str(int(gpus)) if float(gpus).is_integer() else f"{gpus:g}"


def _label(row: dict[str, Any]) -> str:
    """A job's id as the CLI writes it (9_1: task 1 of array 9)."""
    if row.get("array_job") is not None:
        return f"{row['array_job']}_{row['array_task']}"
    return str(row.get("id"))


def _rows(*filters: str) -> list[dict[str, Any]]:
    out = _json("queue", "--json", *filters)
    rows = out.get("jobs", []) if isinstance(out, dict) else out
    return [r for r in rows if isinstance(r, dict)]


def _short(row: dict[str, Any]) -> dict[str, Any]:
    return {**{k: row.get(k) for k in ROW_KEYS}, "id": _label(row)}


def list_queue(
    state: Annotated[str | None, Field(description='only these states, comma-separated: '
                                       '"PENDING", "RUNNING", "PD,R", "FAILED"...')] = None,
    user: Annotated[str | None, Field(description="only this user's jobs")] = None,
    limit: Annotated[int, Field(description="at most this many jobs listed (the summary "
                                "counts them all)", ge=0, le=1000)] = 50,
    all: Annotated[bool, Field(description="also the jobs that ended in the last day")] = False,
) -> dict[str, Any]:  # fmt: skip
    """The queue: a summary (jobs by state and by user, of all that match) and the first
    ``limit`` jobs in the queue's order (running, then pending in the order they would
    start), each with its id, name, user, state, GPUs, pending reason and exit code.
    ``show_job`` gives one in full."""
    args = [*(["--all"] if all else []), *(["-u", user] if user else []),
            *(["-t", state] if state else [])]  # fmt: skip
    rows = _rows(*args)
    by_state: dict[str, int] = {}
    by_user: dict[str, int] = {}
    for r in rows:
        by_state[str(r.get("state"))] = by_state.get(str(r.get("state")), 0) + 1
        by_user[str(r.get("user"))] = by_user.get(str(r.get("user")), 0) + 1
    shown = [_short(r) for r in rows[:limit]]
    return {"summary": {"total": len(rows), "by_state": by_state, "by_user": by_user},
            "jobs": shown, "more": len(rows) - len(shown)}  # fmt: skip


def show_job(job_id: JobId) -> Any:
    """One job in full: command, request, limits, attempts, history, log paths."""
    return _json("show", "--json", _id(job_id))


def job_logs(
    job_id: JobId,
    lines: Annotated[int, Field(description="how many last lines", ge=1, le=10000)] = 100,
    stderr: Annotated[bool, Field(description="its -e file instead of its output")] = False,
) -> Any:  # fmt: skip
    """The last ``lines`` lines of a job's output (``stderr``: of its -e file)."""
    if not 1 <= lines <= 10000:
        raise ToolError(f"lines={lines}: ask for 1 to 10000 lines")
    return _json("logs", "--json", "-n", str(lines), *(["--err"] if stderr else []), _id(job_id))


def cancel_job(
    job_id: JobId,
    signal: Annotated[str | None, Field(description='only send this signal, e.g. "USR1" '
                                        '(the job goes on)')] = None,
) -> Any:  # fmt: skip
    """Cancel a job of yours (or only send it ``signal``)."""
    return _json("cancel", "--json", *(["-s", signal] if signal else []), _id(job_id))


JobIds = Annotated[list[str], Field(description="job ids (12, 12_3)", min_length=1)]


def hold_job(job_ids: JobIds) -> Any:
    """Keep pending jobs of yours from starting until release_job lets them go."""
    return _json("hold", "--json", *(_id(j) for j in job_ids))


def release_job(job_ids: JobIds) -> Any:
    """Let held jobs of yours start again (their place in the queue is kept)."""
    return _json("release-job", "--json", *(_id(j) for j in job_ids))


def update_job(
    job_id: JobId,
    gpus: Annotated[float | None, Field(description="GPUs: a whole number, or a share below 1",
                                        gt=0)] = None,
    time: Time = None,
    priority: Priority = None,
    name: Name = None,
    dependency: Annotated[str | None, Field(description='its dependency instead of its own '
                                            '("afterok:12"; "" for none)')] = None,
) -> Any:  # fmt: skip
    """Change a pending job of yours (a running one keeps what it started with); each value
    is checked as submit checks it, and a refused change changes nothing."""
    args = [*(["-g", _gpus(gpus)] if gpus is not None else []),
            *(["-t", time] if time is not None else []),
            *(["-p", str(priority)] if priority is not None else []),
            *(["-J", name] if name is not None else []),
            *(["--dependency", dependency] if dependency is not None else [])]  # fmt: skip
    if not args:
        raise ToolError("update_job: give something to change (gpus, time, priority, name, "
                        "dependency)")  # fmt: skip
    return _json("update", "--json", _id(job_id), *args)


def wait_job(
    job_id: JobId,
    timeout_seconds: Annotated[float, Field(description="wait at most this long (0: only "
                                            "look, at once)", ge=0, le=3600)] = 60.0,
) -> dict[str, Any]:  # fmt: skip
    """Wait until the job ends, at most ``timeout_seconds`` (0 to 3600); its end, or
    ``{"ended": false}`` when it is still going."""
    if not 0 <= timeout_seconds <= 3600:
        raise ToolError(f"timeout_seconds={timeout_seconds}: give 0 to 3600 seconds")
    done = _run("wait", "--json", "--timeout", f"{timeout_seconds:g}s", _id(job_id),
                timeout=TIMEOUT + timeout_seconds)  # fmt: skip
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if not rows and done.returncode != EXIT_TIMEOUT:
        raise ToolError(done.stderr.strip() or f"exit status {done.returncode}")
    return {"ended": bool(rows), "jobs": rows}


_NAMED = re.compile(r"\bjob (\d+(?:_\d+)?)")
AHEAD = 20  # jobs ahead listed by why_pending (all are counted)


def why_pending(job_id: JobId) -> dict[str, Any]:
    """Why a job has not started (its pending reason in plain words), when it is predicted
    to start (``prediction``, in words ``starts``: from the queue's time limits and the run
    times learned from finished jobs; ``runs``: its own predicted run time), the pending
    jobs ahead of it in the queue's order (``ahead``, the first 20; ``ahead_count``, all)
    and the jobs its reason names (``waiting_for``: those holding the GPUs it needs, or its
    dependencies)."""
    job = show_job(job_id)
    out: dict[str, Any] = {"id": job_id, "state": job.get("state"), "reason": job.get("reason")}
    if job.get("state") != "PENDING":
        return out
    rows = _rows("-t", "PD")
    mine = [r for r in rows if r.get("id") == job.get("id")]
    if mine:
        order = mine[0].get("order")
        ahead = [r for r in rows if order is not None and (r.get("order") or 0) < order]
        ahead.sort(key=lambda r: r.get("order") or 0)
        out["prediction"] = est = mine[0].get("start_estimate")
        out["starts"] = text(est, time.time())  # (the words `berth queue --start` says)
        out["runs"] = runtime_text(est)
        out["ahead_count"] = len(ahead)
        out["ahead"] = [{k: _short(r)[k] for k in ("id", "name", "user", "gpus", "reason")}
                        for r in ahead[:AHEAD]]  # fmt: skip
    out["waiting_for"] = sorted(set(_NAMED.findall(str(job.get("reason") or ""))))
    return out


def recent_failures(
    count: Annotated[int, Field(description="how many of the last failed jobs", ge=1, le=20)] = 5,
    lines: Annotated[int, Field(description="the last lines of each one's log", ge=1,
                                le=200)] = 20,
) -> dict[str, Any]:  # fmt: skip
    """What your last failed jobs (FAILED, TIMEOUT, LOST; of the last day, newest first)
    said: each one's id, name, state, exit code, end reason and the tail of its output."""
    me = pwd.getpwuid(os.getuid()).pw_name
    rows = _rows("--all", "-u", me, "-t", FAILED)
    rows.sort(key=lambda r: (r.get("array_job") or r.get("id") or 0, r.get("id") or 0))
    out = []
    for r in reversed(rows[-count:]):
        entry = {k: _short(r)[k] for k in ("id", "name", "state", "exit_code")}
        done = _run("logs", "--json", "-n", str(lines), _label(r))
        try:
            entry["log_tail"] = json.loads(done.stdout).get("text", "") if done.returncode == 0 \
                else None  # fmt: skip
        except ValueError:
            entry["log_tail"] = None
        if entry["log_tail"] is None:
            entry["log_error"] = done.stderr.strip()
        out.append(entry)
    return {"user": me, "failures": out, "total": len(rows)}


def _id(job_id: str) -> str:
    text = str(job_id).strip()
    head, _, task = text.partition("_")
    if not (text.isascii() and head.isdigit() and (not task or task.isdigit())):
        raise ToolError(f"job id {job_id!r}: expected a number such as 12 (or 12_3, a task)")
    return text


READ_ONLY: tuple[Callable[..., Any], ...] = (
    gpu_status, select_gpus, list_queue, show_job, job_logs, wait_job, why_pending,
    recent_failures,
)  # fmt: skip
ACTING: tuple[Callable[..., Any], ...] = (submit_job, cancel_job, hold_job, release_job, update_job)
TOOLS = READ_ONLY + ACTING


def build() -> MCPServer:
    server: MCPServer = MCPServer(name="berth", version=__version__, instructions=INSTRUCTIONS)
    for tool in READ_ONLY:
        server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))(tool)
    for tool in ACTING:
        hints = ToolAnnotations(read_only_hint=False, destructive_hint=tool is cancel_job,
                                open_world_hint=False)  # fmt: skip
        server.tool(annotations=hints)(tool)
    return server


def serve() -> None:
    build().run("stdio")
