"""Queueing an ended job again (the ``resubmit`` request, `berth resubmit ID [--cascade]`).

The new job gets a new id and the old one's spec, as stored (command, environment,
directory, GPUs, limits, log patterns, user), with what `berth update` changed on the old
job (its GPUs, time limit, priority, name); its history begins ``resubmitted from N by
USER`` and `berth show` says ``resubmitted from: N``. Its dependencies on jobs still
unfinished stay; those on jobs that have ended are dropped (running it again is the
point). It goes through submit's own checks (:func:`berth.daemon.engine.admission.admit.prepare`:
the machine, the user's limits, its log paths), as its user: an admin who resubmits
alice's job queues it as alice's.

``cascade``: also the jobs that ended FAILED or CANCELLED (``DependencyNeverSatisfied``
among them) depending on it, and theirs in turn, in dependency order, each dependency on a
resubmitted job rewritten onto its new id. Only those the caller may act on (their owner,
or an admin); the others are named in the answer (``skipped``). At most ``[limits]
max_request_jobs`` jobs in one request; all are checked before any is queued, and all are
queued in one commit.

Only single jobs for now: an array's tasks share one stored spec, and a task resubmitted
alone would be no array's; the request names the array and says to submit it again.
"""

from __future__ import annotations

from berth.core.job import Event, Job
from berth.core.states import FINISHED, State
from berth.daemon.engine.admission import admit, arrays, depends
from berth.daemon.engine.admission.prepared import Owner
from berth.daemon.store.store import UnreadableSpec
from berth.dependency import Dependency
from berth.wire import protocol
from berth.wire.jobspec import DAEMON_FIELDS
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine.admission.prepared import Allow
    from berth.daemon.engine.admission.prepared import Caller as Peer
    from berth.daemon.engine.engine import Engine
    from berth.wire.jobspec import JobSpec

# What a resubmission does not take from the stored spec: the daemon's own fields, and what
# applied to the first submission only (its twin check, its hold, its start time, an array).
_DROPPED = (*DAEMON_FIELDS, "unique", "once", "hold", "begin", "array", "array_argvs", "after_ok")
DOOMED = (State.FAILED, State.CANCELLED)  # what a dependent of a failed job ended as


def _label(job: Job) -> str:
    task = arrays.of(job)
    return f"{task[0]}_{task[1]}" if task else str(job.id)


def _single(job: Job) -> None:
    task = arrays.of(job)
    if task is not None:
        raise ProtocolError(
            protocol.INVALID_STATE,
            f"job {_label(job)} is a task of array {task[0]}: `berth resubmit` takes single "
            f"jobs for now; submit the array again (`berth show {task[0]}` shows its command)",
        )


def _spec(engine: Engine, job: Job) -> JobSpec:
    try:
        return engine.store.spec(job.id)
    except UnreadableSpec as e:
        raise ProtocolError(protocol.INTERNAL, f"{e}; submit it again by hand") from e


def _raw(spec: JobSpec, job: Job) -> dict[str, Any]:
    """What to submit: the stored spec, with what `berth update` changed on ``job``."""
    raw = {k: v for k, v in spec.to_dict().items() if k not in _DROPPED}
    raw["name"], raw["priority"] = job.name, job.priority
    if job.time_limit is not None:
        raw["time_limit"] = job.time_limit
    if not spec.by_memory or "gpus" in job.extra.get("updated", ()):
        raw.pop("by_memory", None)
        raw["gpus"] = job.request.gpus  # (a share sized by memory is sized again)
    return raw


def _cascade(engine: Engine, peer: Peer, root: Job, most: int) -> tuple[list[Job], list[str]]:
    """The dependents to resubmit with ``root`` (in dependency order) and those skipped."""
    rows = engine.store.ended_with_dependencies(root.id, most * 8)  # (a bounded read)
    candidates = [Job.from_dict(r) for r in rows]
    chosen: dict[int, Job] = {root.id: root}
    skipped: list[str] = []
    grew = True
    while grew:  # (each pass adds the dependents of what was chosen: at most `most` passes)
        grew = False
        for job in candidates:
            if job.id in chosen or job.state not in DOOMED or arrays.of(job) is not None:
                continue
            if job.state is State.CANCELLED and job.attempts:
                continue  # (cancelled while it ran: not because of a dependency)
            if not any(d.job_id in chosen for d in job.dependencies):
                continue
            if job.uid != peer.uid and not peer.admin:
                skipped.append(f"{job.id} (of {job.user}: only they or an admin may)")
                continue
            chosen[job.id] = job
            grew = True
        if len(chosen) > most:
            raise ProtocolError(
                protocol.BAD_REQUEST,
                f"--cascade: more than {most} jobs to resubmit ([limits] max_request_jobs); "
                f"resubmit {root.id} and its dependents in parts",
            )
    return _ordered(chosen), sorted(set(skipped))


def _ordered(jobs: dict[int, Job]) -> list[Job]:
    """``jobs`` with each after those of them it depends on (then by id)."""
    out: list[Job] = []
    placed: set[int] = set()
    left = sorted(jobs.values(), key=lambda j: j.id)
    while left:
        ready = [j for j in left if all(d.job_id in placed or d.job_id not in jobs
                                        for d in j.dependencies)]  # fmt: skip
        ready = ready or left[:1]  # (no cycle among ended jobs; never stuck)
        for j in ready:
            out.append(j)
            placed.add(j.id)
        left = [j for j in left if j.id not in placed]
    return out


def _deps(engine: Engine, job: Job, new_ids: dict[int, int], root: bool) -> tuple[Dependency, ...]:
    """``job``'s dependencies for its new job: onto the new ids of those resubmitted with it;
    the root's on ended jobs dropped."""
    out = []
    for d in job.dependencies:
        if d.job_id in new_ids:
            out.append(Dependency(d.kind, new_ids[d.job_id], d.minutes, d.array))
        elif not root or engine.live(d.job_id) is not None:
            out.append(d)
    return tuple(out)


async def resubmit(
    engine: Engine, peer: Peer, ref: Any, cascade: bool, allow: Allow
) -> dict[str, Any]:
    """Queue the ended job ``ref`` again (``cascade``: with its doomed dependents), if
    ``allow`` (the caller's rules) lets ``peer`` resubmit it."""
    root = engine.find(arrays.resolve(engine, ref))
    if root is None:
        raise ProtocolError(protocol.NO_SUCH_JOB, f"no job {ref}: see `berth queue --all`")
    _single(root)
    allow(root)
    if root.state not in FINISHED:
        raise ProtocolError(
            protocol.INVALID_STATE,
            f"job {root.id} is {root.state.value}: only an ended job can be resubmitted"
            + ("; `berth update` changes a pending one" if root.state is State.PENDING else ""),
        )
    await engine.durable()  # (jobs that ended just now are in the store)
    most = engine.accounts.max_request_jobs
    jobs, skipped = _cascade(engine, peer, root, most) if cascade else ([root], [])
    prepared = []
    queued: dict[int, int] = {}  # uid -> jobs this request adds (their max_jobs)
    adds: dict[int, int] = {}  # uid -> bytes this request adds to the store (max_user_bytes)
    for job in jobs:  # every one checked before any is queued
        owner = Owner(job.uid, job.gid, job.uid == peer.uid and peer.admin)
        n = queued.get(job.uid, 0)
        held = engine.jobs.count_of(job.uid)  # (the user's unfinished jobs: kept by the table)
        raw, more = _raw(_spec(engine, job), job), adds.get(job.uid, 0)
        try:
            p = await admit.prepare(engine, owner, raw, n, held, None, more)
        except ProtocolError as e:
            raise ProtocolError(e.code, f"job {job.id}: {e.message}; nothing was queued") from None
        queued[job.uid] = n + 1
        adds[job.uid] = more + p.stored
        prepared.append((job, owner, p))
    new_ids: dict[int, int] = {}
    futures = []
    now = engine.clock.time()
    for job, owner, p in prepared:  # (one turn of the loop: one commit)
        p.deps = _deps(engine, job, new_ids, job is root)
        p.spec = p.spec.replace(dependency=depends.text_of(p.deps, p.any_of))
        reply, futs = admit.insert(engine, owner, p)
        new = engine.jobs[reply["job_id"]]
        new.note("resubmitted_from", job.id)
        new.history = [Event(now, None, State.PENDING, f"resubmitted from {job.id} by {peer.user}")]
        if p.deps:
            engine.control.changed(new, dependencies=True)
        new_ids[job.id] = new.id
        futures += futs
    for fut in futures:
        await fut  # durable before we answer
    return {
        "job_id": new_ids[root.id],
        "jobs": {str(old): new for old, new in new_ids.items()},
        "skipped": skipped,
    }
