"""Start-up reconciliation: rebuild the in-memory queue from the store, and settle every job
the store says is running against what its run file and supervisor say.

For each RUNNING/COMPLETING job, with ``launched`` = its attempt number:

- the run file has an ``exit`` line: the attempt ended while the daemon was down; record it;
- the run file is locked: its supervisor lives; adopt it (pidfd on the pid it wrote);
- the run file exists, unlocked, without ``exit``: the supervisor died uncleanly, or its
  attempt never passed its start gate (:mod:`berth.daemon.supervisor.gate`: the daemon stopped before
  the start was durable, or before it opened the gate). If it never wrote ``go`` (nor a
  ``job`` line) the job never started: requeue it; otherwise the truth is lost: LOST;
- there is no run file: the daemon stopped between the write-ahead and the hand-over; the
  job never ran: requeue it (PREEMPTED, then PENDING at the end of the queue).

Run files of attempts the store does not show running (a start that never became durable)
are removed, once no supervisor holds them.

Nothing runs twice: a job is requeued only when no supervisor of it can exist.

A row that cannot be loaded (its JSON or its fields do not make a job: a bug of an older
berth, a hand edit, a damaged disk) never stops the daemon from starting: it is moved to the
``quarantine`` table with the reason, logged, and counted; its id is never given again.

After a restart of the *machine* (the boot id changed) every supervisor is gone, and a run
file may have lost its last lines (they are not forced to disk): an attempt without an
``exit`` line may have ended, may have been cut off, or may never have started, and nobody can
tell. Such a job is ``LOST`` ("the machine restarted while it ran"), unless it was submitted
with ``--requeue``: then it goes back to the queue (PREEMPTED), as Slurm requeues batch jobs
after a node failure.
"""

from __future__ import annotations

import json
import logging
import time

from berth.core.job import Job
from berth.core.states import State
from berth.daemon.ports import SUPERVISOR_DIED
from berth.daemon.supervisor import runfile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.daemon.engine.engine import Engine

log = logging.getLogger("berth.daemon")


def recover(engine: Engine, rebooted: bool = False) -> dict[str, int]:
    """Load the queue and settle running jobs (``rebooted``: the machine restarted since the
    last daemon ran). Returns counts for the log."""
    store = engine.store
    counts = {
        "pending": 0, "adopted": 0, "ended_while_down": 0, "requeued": 0, "lost": 0,
        "quarantined": 0,
    }  # fmt: skip
    engine.pauses.gpus = store.paused()
    engine.next_id = store.next_id()
    to_settle: list[tuple[Job, int]] = []
    bad: list[tuple[int, str]] = []
    for job_id, data, launched in store.unfinished():
        try:
            job = _load(job_id, data)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            bad.append((job_id, f"cannot load the job: {type(e).__name__}: {e}"))
            continue
        engine.jobs[job.id] = job
        engine.depended.update(d.job_id for d in job.dependencies if d.job_id)
        if job.state is State.PENDING:
            counts["pending"] += 1
        else:
            to_settle.append((job, launched or len(job.attempts)))
    for row in store.db.execute(
        "SELECT id, state, CASE WHEN state = 'FAILED' THEN json_extract(data, "
        "'$.extra.oom_retried') END FROM jobs WHERE state NOT IN ('PENDING', 'RUNNING', "
        "'COMPLETING')"
    ):
        try:
            engine.finished_states[int(row[0])] = State(row[1])
        except ValueError:
            bad.append((int(row[0]), f"unknown state {row[1]!r}"))
        if type(row[2]) is int:  # --retry-oom retried it: its dependents follow the retry
            engine.finished_states.retried[int(row[0])] = row[2]
            engine.depended.add(row[2])
    if bad:
        with store.tx():
            for job_id, why in bad:
                store.quarantine(job_id, why)
        for job_id, why in bad:
            log.error(
                "job %d quarantined (%s); its row is in the quarantine table of %s",
                job_id, why, store.path,
            )  # fmt: skip
        counts["quarantined"] = len(bad)
    keep = set()
    for job, attempt in to_settle:
        path = engine.procs.run_file(job.id, attempt)
        keep.add(path)
        counts[_settle(engine, job, path, attempt, rebooted)] += 1
    engine.procs.discard_strays(keep)
    engine.flush(force=True)
    return counts


def _load(job_id: int, data: str) -> Job:
    d = json.loads(data)
    if not isinstance(d, dict):
        raise TypeError(f"the stored job is a {type(d).__name__}, not an object")
    job = Job.from_dict(d)
    if job.id != job_id:
        raise ValueError(f"the stored job says it is job {job.id}")
    return job


def _settle(engine: Engine, job: Job, path: str, attempt: int, rebooted: bool) -> str:
    procs = engine.procs
    info = procs.record(path)
    if "exit" in info:
        engine.control.record_exit(job, info["exit"], path)
        return "ended_while_down"
    if rebooted:
        why = "the machine restarted while it ran"
        if job.requeue:
            engine.control.requeue_unstarted(job, engine.clock.time(), why + "; requeued (--requeue)")
            procs.discard(path)
            return "requeued"
        engine.control.record_exit(job, None, path, lost=why)
        return "lost"
    if procs.alive(path):
        pid = _wait_for_pid(engine, path)
        if pid is not None:
            try:
                engine.control.adopt(job.id, pid, path, attempt, job.extra.get("lease"))
                return "adopted"
            except ProcessLookupError:
                pass
        info = procs.record(path)
        if "exit" in info:
            engine.control.record_exit(job, info["exit"], path)
            return "ended_while_down"
    if not runfile.began(info):  # (no run file: nothing either)
        engine.control.requeue_unstarted(job, engine.clock.time(), runfile.NEVER_STARTED)
        procs.discard(path)
        return "requeued"
    engine.control.lose(job, path, SUPERVISOR_DIED)  # (once what it left has ended)
    return "lost"


def _wait_for_pid(engine: Engine, path: str, timeout: float = 2.0) -> int | None:
    """The supervisor writes its pid first thing; give a just-forked one a moment."""
    deadline = time.monotonic() + timeout
    while True:
        pid = engine.procs.record(path).get("sup")
        if pid is not None or time.monotonic() > deadline:
            return pid if isinstance(pid, int) else None
        if not engine.procs.alive(path):
            return None
        time.sleep(0.005)
