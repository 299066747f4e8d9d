"""Changing a pending job (the ``update`` request, `berth update`; Slurm's ``scontrol
update``): its GPUs (``gpus``), time limit (``time_limit``, seconds), ``priority``, ``name``
or dependency (``dependency``: an expression as submit's ``--dependency``,
:mod:`berth.dependency`; ``""`` clears it).

- Who: the job's owner or an admin (identity from the socket), answered before anything
  else about the job (another user's running job is not theirs, before it is not pending). A priority above the user's
  own highest (the highest of their unfinished jobs, this one's included) is for admins: a
  user reorders their own jobs, and lowers any, but does not jump others by updating.
- What: each value is checked as the job spec checks it at submit
  (:func:`berth.wire.jobspec.check_field`), then against this machine and the user's limits
  as submit does (:func:`berth.daemon.engine.admission.fitness.check_fits`, ``check_limit``,
  ``Accounts.check_submit``): a request no GPU here could ever satisfy is refused, as it is
  at submit. A dependency must name jobs on record (``@``: the caller's last job, as at
  submit), must be one that can still be met, and must not make a cycle.
- Which: ``12`` is the job, or every pending task of array 12; ``"12_3"`` one task (as
  scontrol does). Only pending jobs (held or waiting for their begin time too): a running
  one is refused by name, with what to do instead.

Every job is checked before any is changed; the changes (:func:`berth.core.change.change`,
each a line of the job's history) are saved in one commit and a pass runs after them.
Cost: one walk of the unfinished jobs (the priority ceiling, the cycle check) and of the
array's tasks, whatever the request.
"""

from __future__ import annotations

import dataclasses

from berth.core.change import change
from berth.core.deps import NEVER, Known
from berth.core.deps import check as check_dependency
from berth.core.job import Job, Request
from berth.core.states import State
from berth.daemon.engine.admission import arrays, depends
from berth.daemon.engine.admission.fitness import check_fits, check_limit
from berth.dependency import Dependency
from berth.errors import UsageError
from berth.wire import protocol
from berth.wire.checks import MAX_ID, integer
from berth.wire.jobspec import check_field
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine.admission.prepared import Allow
    from berth.daemon.engine.admission.prepared import Caller as Peer
    from berth.daemon.engine.engine import Engine

# What ``set`` may hold: the job spec's field names (checked by its own check)
KEYS = ("gpus", "time_limit", "priority", "name", "dependency")


def _values(raw: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise ProtocolError(protocol.BAD_REQUEST, f"update: unknown field {unknown[0]!r} "
                            f"(known: {', '.join(KEYS)}); nothing was changed")  # fmt: skip
    if not raw:
        raise ProtocolError(
            protocol.BAD_REQUEST, "update: nothing to change: give -g, -t, -p, -J or --dependency"
        )
    out = {
        key: "" if key == "dependency" and value in ("", None) else check_field(key, value)
        for key, value in raw.items()
    }
    limit = out.get("time_limit")
    if limit is not None and not float(limit) > 0:
        raise ProtocolError(protocol.BAD_REQUEST, f"-t {raw['time_limit']!r}: must be positive")
    if "name" in out and not out["name"]:
        raise ProtocolError(protocol.BAD_REQUEST, "-J '': give the job a name")
    return out


def _jobs(engine: Engine, ref: Any, allow: Allow) -> tuple[list[Job], str]:
    """The jobs ``ref`` names that the update changes, and how to name them; whose they are
    is answered first (another user's running job: not theirs, before not pending)."""
    if type(ref) is str:
        job = engine.find(arrays.resolve(engine, ref))
        jobs, label = [job] if job is not None else [], ref
    else:
        head = integer("job_id", ref, 1, MAX_ID)
        tasks = arrays.members(engine, head)
        found = [engine.find(i) for i in tasks or [head]]
        jobs, label = [j for j in found if j is not None], str(head)
        for job in jobs[:1]:  # (an array's tasks are one user's)
            allow(job)
        if tasks:  # an array: its pending tasks (scontrol update of an array's id)
            pending = [j for j in jobs if j.state is State.PENDING]
            if not pending:
                raise ProtocolError(
                    protocol.INVALID_STATE,
                    f"array {head} has no pending task: only pending tasks can be updated "
                    f"(`berth queue --all` shows its tasks); `berth resubmit` queues an "
                    "ended one again",
                )
            return pending, label
    if not jobs:
        raise ProtocolError(protocol.NO_SUCH_JOB, f"no job {label}: see `berth queue --all`")
    job = jobs[0]
    allow(job)
    if job.state is not State.PENDING:
        then = (
            f"wait for it to end, or `berth cancel {label}`; then `berth resubmit {label}` "
            "queues it again and `berth update` changes the new job while it waits"
            if not job.state.finished
            else f"`berth resubmit {label}` queues it again; `berth update` changes that one"
        )
        raise ProtocolError(
            protocol.INVALID_STATE,
            f"job {label} is {job.state.value}: only a pending job can be updated (a running "
            f"job keeps what it started with); {then}",
        )
    return jobs, label


def _dependencies(
    engine: Engine, peer: Peer, jobs: list[Job], text: str
) -> tuple[tuple[Dependency, ...], bool, str | None]:
    """(terms, any of them, the text as stored) of the dependency ``text`` (``""``: none),
    resolved as submit resolves it; refused if it could never be met or leads back to one
    of ``jobs``."""
    if not text:
        return (), False, None
    try:
        terms, any_of, shown = depends.resolve(engine, peer, text)
    except ProtocolError as e:
        said = e.message.replace("nothing was queued", "nothing was changed")
        raise ProtocolError(e.code, said) from None
    probe = dataclasses.replace(jobs[0], dependencies=terms, dependency_any=any_of)
    known = Known(engine.unfinished(), (), engine.finished_states)
    verdict, detail, _ = check_dependency(probe, known, engine.clock.time())
    if verdict == NEVER:
        raise ProtocolError(
            protocol.INVALID_STATE,
            f"--dependency {shown}: it could never be met ({detail}); nothing was changed",
        )
    mine = {j.id for j in jobs}
    live = {j.id: j for j in engine.unfinished()}
    seen: set[int] = set()
    todo = [d.job_id for d in terms]
    while todo:  # (each unfinished job visited once: bounded by the queue)
        i = todo.pop()
        if i in mine:
            raise ProtocolError(
                protocol.BAD_REQUEST,
                f"--dependency {shown}: job {i} would wait for itself (its dependencies lead "
                "back to it); nothing was changed",
            )
        if i not in seen and i in live:
            seen.add(i)
            todo += [d.job_id for d in live[i].dependencies]
    return terms, any_of, shown


def _check(engine: Engine, peer: Peer, job: Job, values: dict[str, Any]) -> None:
    """Refuse what submit would refuse of the changed job, and a priority the caller may not
    give it."""
    request, limit = job.request, values.get("time_limit")
    if "gpus" in values:
        if not values["gpus"] or not job.request.gpus:  # (GPUs or none: as submitted)
            raise ProtocolError(
                protocol.BAD_REQUEST,
                f"-g {values['gpus']:g}: a pending job keeps GPUs or none as it was submitted "
                "(a CPU-only job runs differently); cancel it and submit it again; nothing "
                "was changed",
            )
        try:
            request = Request.from_dict({**job.request.to_dict(), "gpus": values["gpus"]})
        except UsageError as e:
            raise ProtocolError(protocol.BAD_REQUEST, f"-g {values['gpus']:g}: {e}") from None
        check_fits(engine.res.inventory, request)
    if limit is not None and not job.requeue:  # (requeued at the limit: switched, not refused)
        check_limit(limit, engine.opts.max_job_time)
    if "gpus" in values or limit is not None:  # the user's limits (max_gpus, max_time)
        engine.accounts.check_submit(job.user, request, limit, 0, 0)
    new = values.get("priority")
    if new is not None and new > job.priority and not peer.admin:
        top = max(j.priority for j in engine.unfinished() if j.uid == job.uid)
        if new > top:
            raise ProtocolError(
                protocol.NOT_OWNER,
                f"-p {new}: above {job.user}'s own highest priority ({top}, of their queued "
                f"jobs); only an admin ({engine.opts.admins()}) may raise a job above it; "
                f"ask for -p {top} or less",
            )


async def update(
    engine: Engine, peer: Peer, ref: Any, raw: dict[str, Any], allow: Allow
) -> dict[str, Any]:
    """Change the pending job ``ref`` names (an array's id: its pending tasks) to ``raw``'s
    values, if ``allow`` (the caller's rules) lets ``peer`` change each; durable before the
    answer."""
    values = _values(raw)
    jobs, label = _jobs(engine, ref, allow)
    for job in jobs:
        allow(job)
    deps: tuple[Dependency, ...] | None = None
    any_of, shown = False, None
    if "dependency" in values:
        deps, any_of, shown = _dependencies(engine, peer, jobs, values.pop("dependency"))
    for job in jobs:  # every job checked before any is changed
        _check(engine, peer, job, values)
    now = engine.clock.time()
    changed: dict[str, list[str]] = {}
    for job in jobs:
        said = change(job, now=now, by=peer.user, dependencies=deps, any_of=any_of, **values)
        if deps is not None:  # (what queue --tree, --json and show print)
            if shown:
                job.note("dependency", shown)
            else:
                job.unnote("dependency")
        if said:
            job.note("updated", sorted({*job.extra.get("updated", ()), *_fields(said)}))
            engine.control.changed(job, dependencies=deps is not None)
            engine.save(job)  # (committed with this turn's group)
        task = arrays.of(job)
        changed[f"{task[0]}_{task[1]}" if task else str(job.id)] = said
    engine.kick()
    unsaved = await engine.saved()  # durable before we answer (or we say it is not)
    return {"job_id": label, "changed": changed, **unsaved}


def _fields(said: list[str]) -> list[str]:
    """The fields of ``updated: FIELD OLD -> NEW`` lines (``time limit`` is time_limit)."""
    out = []
    for line in said:
        words = line.removeprefix("updated: ").split()
        out.append("time_limit" if words[:2] == ["time", "limit"] else words[0])
    return out
