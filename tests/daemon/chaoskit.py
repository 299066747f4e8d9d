"""The kit of tests/daemon/test_chaos.py: jobs that leave evidence of every run they make, the
processes of one test's daemon found by what the kernel shows, and the checks of a queue's
end against that evidence.

Evidence: each job is a bash script that appends (``O_APPEND``, one ``write`` a line) to one
file ``S JOBID ATTEMPT TIME GPU-UUIDS`` as it starts and ``E JOBID ATTEMPT TIME CODE`` just
before it exits with CODE (``JOBID`` is ``$BERTH_JOB_ID``: an array's task is ``A_I``;
``TIME`` is ``$EPOCHREALTIME``, the clock the daemon's attempt times come from). A run killed
on the way leaves its ``S`` line only. Before its ``S`` line a run locks one file per GPU
(``flock``, held by its processes until the last has died, kill -9 included) and writes
``C JOBID ATTEMPT TIME UUID`` if one is locked already: two runs on one GPU at once, seen by
the kernel even where no end line says when the first one really ended.

:func:`violations` reads the queue's end from the state database (once the daemon stopped: what
it says is durable) and lists every way it disagrees with the evidence or with berth's
promises (README, docs/daemon.md "Crash recovery").
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from berth.daemon.engine.control import DIED_UNSTARTED
from berth.daemon.supervisor.runfile import NEVER_STARTED

# $1: the evidence file, $2: seconds to run (0: none; the first run of a "requeue" job: $4),
# $3: the exit code, $5: ignore SIGTERM (a job that takes its time to stop). Each GPU's lock
# file is locked (flock, for as long as any process of the run lives: the kernel lets go at
# its death, kill -9 included): a run that finds one locked shares its GPU with another.
SCRIPT = r"""
ev=$1 d=$2
[ -z "$5" ] || trap '' TERM
if [ -n "$4" ] && grep -q "^S $BERTH_JOB_ID " "$ev"; then d=0; fi
for g in ${BERTH_GPU_UUIDS//,/ }; do
    exec {fd}>>"$ev.lock.$g"
    flock -n "$fd" || printf 'C %s %s %s %s\n' "$BERTH_JOB_ID" "$BERTH_ATTEMPT" "$EPOCHREALTIME" "$g" >> "$ev"
done
printf 'S %s %s %s %s\n' "$BERTH_JOB_ID" "$BERTH_ATTEMPT" "$EPOCHREALTIME" "$BERTH_GPU_UUIDS" >> "$ev"
[ "$d" = 0 ] || sleep "$d"
printf 'E %s %s %s %s\n' "$BERTH_JOB_ID" "$BERTH_ATTEMPT" "$EPOCHREALTIME" "$3" >> "$ev"
exit "$3"
"""

FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "LOST"}


def argv(
    evidence: str, seconds: float, code: int, again: bool = False, stubborn: bool = False
) -> list[str]:
    """The command of a job that leaves evidence (``again``: a --requeue job's first run,
    which outlives its time limit; later runs end at once; ``stubborn``: it ignores SIGTERM)."""
    flags = ["1" if again else "", "1" if stubborn else ""]
    return ["bash", "-c", SCRIPT, "job", evidence, f"{seconds:g}", str(code), *flags]


@dataclass
class Run:
    job: int
    attempt: int
    start: float
    gpus: tuple[str, ...]
    end: float | None = None
    code: int | None = None


@dataclass
class Plan:
    """What the test asked of one job."""

    code: int = 0
    parent: int | None = None  # afterok on this job
    requeue: bool = False  # --requeue, a time limit its first run outlives
    stubborn: bool = False  # it ignores SIGTERM
    cancelled: bool = False  # the test asked to cancel it (at some moment)
    kind: str = ""


@dataclass
class Chaos:
    """What the test did: each job's plan, arrays' first ids, and its events (each kill,
    cancel, release, submit: for the failure message)."""

    seed: int
    plans: dict[int, Plan] = field(default_factory=dict)
    arrays: dict[int, int] = field(default_factory=dict)  # array id -> its first task's id
    events: list[str] = field(default_factory=list)


def read_evidence(path: str, arrays: dict[int, int], shared: list[str]) -> list[Run]:
    """Every run the evidence shows, its end where it wrote one; ``shared`` gets a line for
    every run that found one of its GPUs' locks held (another run's process lives on it)."""
    runs: dict[tuple[int, int, int], Run] = {}
    seen: dict[tuple[int, int], int] = {}
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        parts = line.split(" ")
        kind, ident, attempt, when = parts[0], parts[1], int(parts[2]), float(parts[3])
        head, _, task = ident.partition("_")
        job = arrays[int(head)] + int(task) if task else int(head)
        if kind == "C":
            shared.append(f"run {job}.{attempt} found GPU {parts[4][:12]} held by another run")
            continue
        if kind == "S":
            n = seen.get((job, attempt), 0)
            seen[(job, attempt)] = n + 1
            gpus = tuple(g for g in (parts[4] if len(parts) > 4 else "").split(",") if g)
            runs[(job, attempt, n)] = Run(job, attempt, when, gpus)
        else:
            n = seen.get((job, attempt), 1) - 1
            run = runs.get((job, attempt, n))
            if run is not None:
                run.end, run.code = when, int(parts[4])
    return list(runs.values())


def stored_jobs(state_dir: str) -> dict[int, dict[str, Any]]:
    """Every job as the state database holds it (read once the daemon has stopped)."""
    db = sqlite3.connect(f"file:{os.path.join(state_dir, 'berth.db')}?mode=ro", uri=True)
    try:
        return {int(i): json.loads(d) for i, d in db.execute("SELECT id, data FROM jobs")}
    finally:
        db.close()


def violations(chaos: Chaos, jobs: dict[int, dict[str, Any]], runs: list[Run]) -> list[str]:
    """Every disagreement between the jobs' ends and the evidence of their runs."""
    out: list[str] = []
    by_job: dict[int, list[Run]] = {}
    for run in runs:
        by_job.setdefault(run.job, []).append(run)
    for job_id, plan in sorted(chaos.plans.items()):
        job = jobs.get(job_id)
        if job is None:
            out.append(f"job {job_id} ({plan.kind}) is gone from the store")
            continue
        out += _job(job_id, plan, job, by_job.get(job_id, []), jobs, by_job)
    for job_id in by_job:
        if job_id not in chaos.plans:
            out.append(f"a run of job {job_id}, which the test never submitted")
    out += _overlaps(runs, jobs)
    return out


def _job(
    job_id: int, plan: Plan, job: dict[str, Any], runs: list[Run],
    jobs: dict[int, dict[str, Any]], by_job: dict[int, list[Run]],
) -> list[str]:  # fmt: skip
    out: list[str] = []
    name = f"job {job_id} ({plan.kind})"
    state = job["state"]
    attempts = {a["number"]: a for a in job.get("attempts") or []}
    if state not in FINISHED:
        out.append(f"{name} never ended: {state}")
    per_attempt: dict[int, list[Run]] = {}
    for run in runs:
        per_attempt.setdefault(run.attempt, []).append(run)
    for number, its in per_attempt.items():
        if len(its) > 1:
            out.append(f"{name}: attempt {number} ran {len(its)} times")
        if number not in attempts:
            out.append(f"{name}: a run of attempt {number}, which berth never recorded")
    for number, a in attempts.items():
        out += _attempt(name, plan, a, per_attempt.get(number, []))
    if not attempts and runs:
        out.append(f"{name} ran ({len(runs)} run(s)) but berth recorded no attempt")
    doomed = plan.parent is not None and jobs.get(plan.parent, {}).get("state") != "COMPLETED"
    if state == "CANCELLED" and not attempts and not plan.cancelled and not doomed:
        out.append(f"{name} was cancelled before it started, and nobody cancelled it")
    if state in {"COMPLETED", "FAILED"}:
        last = attempts[max(attempts)] if attempts else {}
        if last.get("exit_code") != plan.code:
            out.append(
                f"{name} ended {state} {last.get('exit_code')}, its command exits {plan.code}"
            )
    cancel = [e["at"] for e in job["history"] if e["detail"] == "cancel requested"]
    if cancel and any(e["state"] == "RUNNING" and e["at"] > cancel[0] for e in job["history"]):
        out.append(f"{name} started again after its cancel was recorded")
    if state == "TIMEOUT":
        out.append(f"{name} ended TIMEOUT: none of the test's jobs outlives a limit unrequeued")
    if plan.parent is not None and runs:
        parent = jobs.get(plan.parent, {})
        ends = [r.end for r in by_job.get(plan.parent, []) if r.end is not None]
        if parent.get("state") != "COMPLETED":
            out.append(f"{name} ran, but its afterok parent {plan.parent} is {parent.get('state')}")
        elif ends and min(r.start for r in runs) < max(ends):
            out.append(f"{name} ran before its afterok parent {plan.parent} ended")
    return out


def _attempt(name: str, plan: Plan, a: dict[str, Any], runs: list[Run]) -> list[str]:
    out: list[str] = []
    what = f"{name} attempt {a['number']} ({a.get('outcome')}, {a.get('reason')!r})"
    outcome = a.get("outcome")
    run = runs[0] if runs else None
    if outcome is None:
        out.append(f"{what} never ended")
    elif outcome in ("COMPLETED", "FAILED"):
        if run is None or run.end is None:
            out.append(f"{what}: recorded with an exit code, but the evidence shows no whole run")
        elif run.code != a.get("exit_code"):
            out.append(f"{what}: recorded exit {a.get('exit_code')}, the run exited {run.code}")
    elif outcome == "PREEMPTED":
        never = a.get("reason") in (NEVER_STARTED, DIED_UNSTARTED)
        if never and run is not None:
            out.append(f"{what}: requeued as never started, but it ran")
        if not never and not plan.requeue:
            out.append(f"{what}: requeued, but it was not submitted with --requeue")
        if not never and run is not None and run.end is not None:
            out.append(f"{what}: requeued at its time limit, but its run ended by itself")
    elif outcome == "CANCELLED" and not plan.cancelled:
        out.append(f"{what}: cancelled, and nobody cancelled it")
    elif outcome == "LOST" and "supervisor died" not in str(a.get("reason")):
        out.append(f"{what}: LOST, and not for a supervisor the test killed")
    elif outcome == "TIMEOUT":
        out.append(f"{what}: TIMEOUT")
    return out


def _overlaps(runs: list[Run], jobs: dict[int, dict[str, Any]]) -> list[str]:
    """Two runs on one GPU at once (a run without its end line: until berth recorded its
    attempt's end, after its processes were ended)."""
    spans: dict[str, list[tuple[float, float, str]]] = {}
    for run in runs:
        end = run.end
        if end is None:
            a = {x["number"]: x for x in jobs.get(run.job, {}).get("attempts") or []}
            end = a.get(run.attempt, {}).get("end") or float("inf")
        for gpu in run.gpus:
            spans.setdefault(gpu, []).append((run.start, end, f"{run.job}.{run.attempt}"))
    out = []
    for gpu, its in spans.items():
        its.sort()
        last_end, last = float("-inf"), ""  # the latest end of the runs before (and whose)
        for start, end, run in its:
            if start < last_end:
                out.append(
                    f"{gpu[:12]}: run {run} started at {start:.3f}, before run {last} ended ({last_end:.3f})"
                )
            if end > last_end:
                last_end, last = end, run
    return out


# -- the processes of one test's daemon ---------------------------------------------------------


def ours(marker: str, pids: Iterable[int] | None = None) -> dict[int, str]:
    """pid -> comm of every living process (of ``pids``, else all) whose environment holds
    ``marker`` (a variable only this test's daemon, its fork server, supervisors and jobs
    carry)."""
    found = {}
    needle = marker.encode()
    for name in os.listdir("/proc") if pids is None else map(str, pids):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            continue
        found[int(name)] = stat[stat.index("(") + 1 : stat.rindex(")")]
    return found


def supervisors(procs: dict[int, str]) -> list[int]:
    """The supervisors among ``procs`` (pid -> comm, from :func:`ours`): named ``berth-sup``,
    and not the child of one. A job its supervisor is starting bears its name until its
    exec (posix_spawn's child runs the file actions first): killing that is killing the job,
    which then ends as killed by SIGKILL, not as a supervisor killed (seen once: seed 134)."""
    return [p for p, comm in procs.items() if comm == "berth-sup" and procs.get(_parent(p)) != comm]


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0
