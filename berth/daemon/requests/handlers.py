"""One handler per request type, and the dispatch table. Handlers get the engine, the peer
(uid/gid from SO_PEERCRED, never from the message) and the request (fields typed by
:mod:`berth.wire.protocol`); they check its values strictly (:mod:`berth.daemon.requests.validate`)
and return the response fields or raise ProtocolError / a berth error. Who may do what is
:mod:`berth.daemon.requests.authority`: a job's owner or an admin acts on it (and reads its logs,
attaches to it); everyone sees the queue; with ``--private`` only they see its command and
paths; pausing GPUs and stopping the daemon are for admins.
"""

from __future__ import annotations

import asyncio
import os

from berth.core.job import Job
from berth.core.states import FINISHED, State
from berth.core.transition import hold, release
from berth.daemon.engine.command import pty_path
from berth.daemon.requests import admin, arrays, queueview, report, reserve, validate, views
from berth.daemon.requests.authority import Peer, admins_only, may_see, owned
from berth.daemon.requests.intake import submit, submit_all
from berth.daemon.requests.resubmit import resubmit
from berth.daemon.requests.update import update
from berth.daemon.store.store import UnreadableSpec
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from typing import Any

    from berth.daemon.engine.engine import Engine
    from berth.daemon.requests.stream import Stream

    Handler = Callable[
        [Engine, "Peer", dict[str, Any]], "dict[str, Any] | Stream | Awaitable[dict[str, Any]]"
    ]


def _find(engine: Engine, job_id: int) -> Job:
    job = engine.find(job_id)
    if job is None:
        raise ProtocolError(protocol.NO_SUCH_JOB, f"no job {job_id}: see `berth queue --all`")
    return job


def _owned(engine: Engine, peer: Peer, job_id: int, verb: str) -> Job:
    return owned(_find(engine, job_id), peer, engine.opts, verb)


def _ids(engine: Engine, req: dict[str, Any]) -> list[int]:
    """The jobs a request acts on: an array's id stands for all its tasks, ``"12_3"`` for
    one (:mod:`berth.daemon.requests.arrays`)."""
    return arrays.resolve_all(engine, req.get("job_ids"))


def _states(req: dict[str, Any]) -> set[State]:
    try:
        return {State.parse(s) for s in validate.strings("states", req.get("states"))}
    except ValueError as e:
        raise ProtocolError(protocol.BAD_REQUEST, str(e)) from None


# -- reading (`queue`: berth.daemon.requests.queueview) ----------------------------------------


def _detail(engine: Engine, job: Job) -> dict[str, Any]:
    engine.explain()
    try:
        spec = engine.store.spec(job.id)
    except UnreadableSpec as e:
        raise ProtocolError(
            protocol.INTERNAL,
            f"{e}; it cannot run: submit it again (`berth queue` shows its state)",
        ) from e
    reason = views.with_task_ids(engine.reason(job.id), views.TaskIds(engine.jobs))
    out = views.detail(job, reason, spec, engine.opts.max_job_time)
    if job.state is State.PENDING:
        out["start_estimate"] = engine.estimates.get().get(job.id)
    run = engine.run_of(job.id)
    out["attach"] = (
        pty_path(spec, job.id, run.attempt) or run.path + ".pty"
        if run is not None and out["pty"]
        else None
    )
    return out


def show(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """Anyone may look at a job; with ``--private`` others see no command, directory or
    paths, and only its owner and the admins learn where to attach."""
    job = _find(engine, arrays.resolve(engine, req["job_id"]))
    out = _detail(engine, job)
    if not may_see(peer, job, engine.opts):
        out = views.redact(out)
    if job.uid != peer.uid and not peer.admin:
        out["attach"] = None
    return {"job": out}


def logs(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """The job (as `show`) for `berth logs`: its owner or an admin only."""
    job = _owned(engine, peer, arrays.resolve(engine, req["job_id"]), "read its logs")
    return {"job": _detail(engine, job)}


def attach(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """The job (as `show`, with its terminal) for `berth attach`: its owner or an admin."""
    job = _owned(engine, peer, arrays.resolve(engine, req["job_id"]), "attach to it")
    return {"job": _detail(engine, job)}


async def wait(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """Until the job ends (or ``timeout``). An array's id waits for every task: the answer
    is its first task's row with the array's outcome (COMPLETED if every task did, else the
    first other outcome, in task order), as the Slurm backend answers."""
    ref = req["job_id"]
    job = _find(engine, arrays.resolve(engine, ref))
    limit = validate.timeout(req.get("timeout"))
    tasks = None if type(ref) is str else arrays.members(engine, job.id)
    deadline = None if limit is None else engine.loop.time() + limit
    ended = []
    for task_id in tasks or [job.id]:
        left = None if deadline is None else max(0.0, deadline - engine.loop.time())
        ended.append(await _wait_one(engine, _find(engine, task_id), left))
    row = views.row(ended[0], engine.reason(ended[0].id))
    finished = all(j.state in FINISHED for j in ended)
    if tasks and finished:
        worst = next((j for j in ended if j.state is not State.COMPLETED), ended[0])
        row.update(state=worst.state.value, st=worst.state.code, exit_code=worst.exit_code)
    return {"job": row, "finished": finished}


async def _wait_one(engine: Engine, job: Job, limit: float | None) -> Job:
    if job in engine.settling_jobs():  # it has ended: wait until that is durable
        await engine.durable()
    elif (fut := engine.on_end(job.id)) is not None:
        try:
            await asyncio.wait_for(asyncio.shield(fut), limit)
        except asyncio.TimeoutError:
            pass
        job = _find(engine, job.id)
    return job


# -- control ----------------------------------------------------------------------------------


def cancel(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    sig = validate.signal_number(req.get("signal"))
    ids = _ids(engine, req)
    states = _states(req)
    if req.get("all_mine"):
        ids += [j.id for j in engine.unfinished() if j.uid == peer.uid and j.id not in ids]
    elif not ids:
        raise ProtocolError(protocol.BAD_REQUEST, "name the jobs to cancel (or --all-mine)")
    verb = "cancel it" if sig is None else "signal it"
    jobs = [_owned(engine, peer, i, verb) for i in ids]  # all checked before any is touched
    if states:
        jobs = [j for j in jobs if j.state in states]
    if len(ids) == 1 and not req.get("all_mine") and jobs and jobs[0].state in FINISHED:
        j = jobs[0]
        raise ProtocolError(protocol.INVALID_STATE, f"job {j.id} already ended ({j.state.value})")
    done = {}
    for job in jobs:
        if job.state not in FINISHED:
            task = arrays.of(job)
            label = f"{task[0]}_{task[1]}" if task else str(job.id)
            done[label] = engine.cancel(job, sig)  # (unfinished: in memory)
    if engine.journal.failing is not None and sig is None:  # (each line says it: the CLI)
        note = f" (not saved yet: the state database cannot commit: {engine.journal.failing})"
        done = {label: what + note for label, what in done.items()}
    return {"cancelled": done}


async def _hold_release(
    engine: Engine, peer: Peer, req: dict[str, Any], holding: bool
) -> dict[str, Any]:
    verb = "hold it" if holding else "release it"
    jobs = [_owned(engine, peer, i, verb) for i in _ids(engine, req)]
    for job in jobs:
        if job.state is not State.PENDING:
            verb = "held" if holding else "released"
            raise ProtocolError(
                protocol.INVALID_STATE,
                f"job {job.id} is {job.state.value}: only a pending job can be {verb}",
            )
    now = engine.clock.time()
    at = None if holding else validate.unix_time("at", req.get("at"))
    for job in jobs:
        (hold if holding else release)(job, now=now)
        if at is not None and at > now:  # `release-job --at TIME`: released, not before then
            job.not_before = at
        engine.save(job)  # committed with this turn's group, by the engine's journal
    engine.kick()
    unsaved = await engine.saved()  # durable before we answer (or we say it is not)
    return {"job_ids": [j.id for j in jobs], **unsaved}


async def hold_jobs(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    return await _hold_release(engine, peer, req, True)


async def release_jobs(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    return await _hold_release(engine, peer, req, False)


def status(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    gpus: dict[str, dict[str, Any]] = {}
    for s in engine.res.snapshots:
        gpus[str(s.index)] = {"uuid": s.uuid, "jobs": [], "paused": s.uuid in engine.pauses.gpus}
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
                        {"id": job.id, "label": views.TaskIds(engine.jobs).get(job.id, str(job.id)),
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


def ping(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
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
        "daemon": queueview.daemon_info(engine),
    }


def shutdown(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    admins_only(peer, engine.opts, "stop the daemon")
    engine.loop.call_soon(engine.stop_event.set)
    return {"stopping": True, "running_jobs": engine.running_count()}


HANDLERS: dict[str, Handler] = {
    "ping": ping,
    "submit": submit,
    "submit_all": submit_all,
    "queue": queueview.queue,
    "show": show,
    "logs": logs,
    "attach": attach,
    "wait": wait,
    "cancel": cancel,
    "hold": hold_jobs,
    "release": release_jobs,
    "update": update,
    "resubmit": resubmit,
    "pause": admin.pause,
    "resume": admin.resume,
    "status": status,
    "limits": admin.limits,
    "projects": admin.projects,
    "drain": admin.drain,
    "undrain": admin.undrain,
    "enforce_log": admin.enforce_log,
    "reserve": reserve.reserve,
    "unreserve": reserve.unreserve,
    "reservations": reserve.reservations,
    "report": report.report,
    "shutdown": shutdown,
}
