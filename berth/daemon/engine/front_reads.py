"""What the engine's front reads for `berth status`, `ping` and the dashboard
(:class:`berth.daemon.engine.front.Front`'s ``status``, ``stats``, ``gpus``, ``samples``): the
engine's parts read in one place, answered as plain data."""

from __future__ import annotations

import os

from berth.core.job import Job
from berth.core.states import State
from berth.daemon.engine import queue_view
from berth.daemon.engine.views import TaskIds, row
from berth.daemon.store.store import Store
from berth.wire import protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine.engine import Engine


def status(engine: Engine) -> dict[str, Any]:
    """`berth status`'s view of the daemon: each GPU's jobs and others' use, pauses,
    notes, enforcement, reservations."""
    gpus: dict[str, dict[str, Any]] = {}
    for s in engine.res.snapshots:
        gpus[str(s.index)] = {
            "uuid": s.uuid, "jobs": [], "paused": s.uuid in engine.pauses.gpus
        }  # fmt: skip
    pending = 0
    for job in engine.unfinished():
        if job.state is State.PENDING:
            pending += 1
        elif job.attempts:
            a = job.attempts[-1]
            for i in a.gpus:
                entry = gpus.get(str(i))
                if entry is not None:
                    entry["jobs"].append(
                        {"id": job.id, "label": TaskIds(engine.jobs).get(job.id, str(job.id)),
                         "name": job.name, "user": job.user, "share": a.share,
                         "lease": run.lease_id if (run := engine.runs.get(job.id)) else None}
                    )  # fmt: skip
    for i, use in engine.outside_usage().items():  # (what `simulate --what-if` assumes stays)
        if str(i) in gpus:
            gpus[str(i)]["others"] = {
                "share": use.share, "mem": use.mem, "busy": use.busy, "label": use.label
            }  # fmt: skip
    return {
        "pid": os.getpid(),
        "uid": os.getuid(),  # (the owner of its jobs' claim files)
        "gpus": gpus,
        "pending": pending,
        "running": engine.running_count(),
        "queue_paused": engine.pauses.queue,
        "notes": [line for note in engine.notes if (line := note())],
        "enforce": engine.enforcer.view() if engine.enforcer is not None else None,
        "reservations": engine.reservations.view(engine.clock.time()),
    }


def stats(engine: Engine) -> dict[str, Any]:
    """`berth ping`'s: the daemon, its jobs, the last passes' cost, the GPUs' error."""
    rss = 0
    try:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        pass
    return {
        "pid": os.getpid(),
        "version": protocol.PROTOCOL_VERSION,
        "jobs": len(engine.unfinished()),
        "running": engine.running_count(),
        "rss": rss,
        "last_pass_seconds": engine.last_pass_seconds,
        "last_explain_seconds": engine.last_explain_seconds,
        "gpu_error": engine.res.error,
        "daemon": queue_view.daemon_info(engine),
    }


def gpus(engine: Engine) -> dict[str, Any]:
    """The GPUs as the daemon sees them, for the dashboard: the last readings, the
    ledger's claims (not the daemon's own) and waiters, each running job's leader and
    supervisor pid (-> its label, ``17_1``), pause notes, whether others' commands are
    private, the policy and the GPUs' error."""
    own = engine.own_lease_ids()
    ledger = engine.res.ledger.scan(bodies=True)
    leaders: dict[int, int] = {}
    for job_id, run in engine.runs.items():
        if run.job_pid is None or run.sup_pid is None:  # (as the engine learns them)
            info = engine.procs.record(run.path)
            run.job_pid = run.job_pid or info.get("job")
            run.sup_pid = run.sup_pid or info.get("sup")
        for pid in (run.job_pid, run.sup_pid):
            if pid is not None:
                leaders[pid] = job_id
    labels = {}
    for job_id in engine.runs:
        job = engine.jobs.get(job_id)
        array = job.extra.get("array") if job is not None else None
        labels[job_id] = f"{array[0]}_{array[1]}" if array else str(job_id)
    return {
        "snapshots": engine.res.snapshots,
        "by_uuid": engine.res.by_uuid,
        "claims": [c for c in ledger.claims if c.lease not in own],
        "waiters": ledger.waiters,
        "leaders": leaders,
        "labels": labels,
        "drained": engine.pauses.notes,
        "private": engine.opts.private,
        "policy": engine.opts.policy or "balanced",
        "error": engine.res.error,
        "disk_full": engine.diskfull.disk_full,
    }


def samples(
    engine: Engine, since: float | None = None, keep: tuple[Any, ...] | None = None,
    before: float | None = None, recent: int = 0,
    usage: list[tuple[str, list[tuple[Any, ...]]]] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The dashboard's history in the store: ``keep`` a sample row (and drop those older
    than ``before``) with the next commit; read the samples ``since``; the ``recent``
    jobs that finished last (as queue rows, newest first)."""
    if keep is not None:
        engine.journal.execute(Store.SAMPLE_SQL, [keep])
        if before is not None:
            engine.journal.execute(Store.PRUNE_SAMPLES_SQL, [(before,)])
    for sql, values in usage or ():  # (`berth report`'s efficiency, outside use: web/usage.py)
        engine.journal.execute(sql, values)
    out: dict[str, Any] = {}
    if since is not None:
        out["samples"] = engine.store.samples_since(since)
    if recent:
        rows = []
        for d in engine.store.finished_recent(recent):
            try:
                rows.append(row(Job.from_dict(d), None))
            except (KeyError, ValueError, TypeError):
                continue
        out["recent"] = rows
    return out
