"""What the engine's front reads for `berth status`, `ping` and the dashboard
(:meth:`berth.daemon.engine.front.Front.view`'s kinds, each a function here of that name:
:data:`VIEWS`): the engine's parts read in one place, answered as plain data."""

from __future__ import annotations

import os

from berth.core.inputs import DEFAULT_POLICY
from berth.core.job import Job
from berth.core.states import State
from berth.daemon.engine import queue_view, reports
from berth.daemon.engine.audit import read_log
from berth.daemon.engine.views import TaskIds, row
from berth.daemon.store.store import Store
from berth.wire import protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable
    from typing import Any

    from berth.daemon.engine.admission.prepared import Caller
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
        "claims": [c for c in ledger.claims if c.lease not in own or c.uid != os.geteuid()],
        "waiters": ledger.waiters,
        "leaders": leaders,
        "labels": labels,
        "drained": engine.pauses.notes,
        "private": engine.opts.private,
        "policy": engine.opts.policy or DEFAULT_POLICY,
        "error": engine.res.error,
        "disk_full": engine.diskfull.disk_full,
        "starts_exhausted": engine.diskfull.exhausted,
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


def projects(engine: Engine) -> dict[str, Any]:
    """Each project's usage, quotas and members (`berth admin projects`)."""
    p = engine.accounts.projects
    return {
        "projects": p.summary(engine.unfinished(), engine.clock.time()),
        "require_project": p.require,
        "default_project": p.default,
    }


def enforce_log(engine: Engine, limit: int) -> dict[str, Any]:
    """The last ``limit`` entries of the enforcement audit log (`berth admin log`)."""
    enforcer = engine.enforcer
    path = enforcer.audit_path if enforcer is not None else ""
    devices = enforcer.devices if enforcer is not None else ""
    return {"path": path, "entries": read_log(path, limit) if path else [], "devices": devices}


def unfinished(engine: Engine) -> list[Job]:
    """The unfinished jobs (pending, running, completing), in no particular order."""
    return list(engine.unfinished())


def report(
    engine: Engine, caller: Caller, since: float, until: float | None,
    groupings: dict[str, list[str]], by: list[str],
) -> asyncio.Future[dict[str, Any]]:  # fmt: skip
    """`berth report` and the Usage tab: GPU-hours, waits, end states and efficiency over
    ``since``..``until`` grouped as each of ``groupings`` says (:mod:`reports`, on its own
    thread: the loop schedules meanwhile)."""
    return reports.run(reports.ask(engine, caller, since, until, by), groupings)


VIEWS: dict[str, Callable[..., Any]] = {
    "status": status, "stats": stats, "gpus": gpus, "projects": projects,
    "enforce_log": enforce_log, "unfinished": unfinished, "samples": samples, "report": report,
}  # fmt: skip
