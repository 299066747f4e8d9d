"""The jobs' family: one handler per request type that reads or acts on a job in the queue
(``queue`` itself: :mod:`berth.daemon.requests.queueview`; a job coming in, ``submit``: the
socket's own, :mod:`berth.daemon.requests.server`). Handlers get the engine's front
(:class:`berth.daemon.engine.front.Front`: its verbs, never its parts), the peer (uid/gid from
SO_PEERCRED, never from the message) and the request (fields typed by
:mod:`berth.wire.protocol`); they check its values strictly
(:mod:`berth.daemon.requests.validate`), judge who may (:mod:`berth.daemon.requests.authority`:
a job's owner or an admin acts on it (and reads its logs, attaches to it); everyone sees the
queue; with ``--private`` only they see its command and paths), call a verb, and return the
response fields or raise ProtocolError / a berth error.
"""

from __future__ import annotations

from berth.core.states import FINISHED, State
from berth.daemon.engine.views import redact
from berth.daemon.requests import validate
from berth.daemon.requests.authority import Peer, may_see, owned
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.core.job import Job
    from berth.daemon.engine.front import Front


def _states(req: dict[str, Any]) -> set[State]:
    try:
        return {State.parse(s) for s in validate.strings("states", req.get("states"))}
    except ValueError as e:
        raise ProtocolError(protocol.BAD_REQUEST, str(e)) from None


# -- reading (`queue`: berth.daemon.requests.queueview) ----------------------------------------


def show(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """Anyone may look at a job; with ``--private`` others see no command, directory or
    paths, and only its owner and the admins learn where to attach."""
    job, out = front.show(req["job_id"])
    if not may_see(peer, job):
        out = redact(out)
    if job.uid != peer.uid and not peer.admin:
        out["attach"] = None
    return {"job": out}


def logs(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """The job (as `show`) for `berth logs`: its owner or an admin only."""
    return {"job": front.show(req["job_id"], lambda job: owned(job, peer, "read its logs"))[1]}


def attach(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """The job (as `show`, with its terminal) for `berth attach`: its owner or an admin."""
    return {"job": front.show(req["job_id"], lambda job: owned(job, peer, "attach to it"))[1]}


async def wait(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """Until the job ends (or ``timeout``); an array's id: every task."""
    limit = validate.timeout(req.get("timeout"))
    return await front.wait(req["job_id"], limit)


# -- control ----------------------------------------------------------------------------------


def cancel(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    sig = validate.signal_number(req.get("signal"))
    mine = peer.uid if req.get("all_mine") else None
    found = front.named(req.get("job_ids"), mine)
    states = _states(req)
    if mine is None and not found:
        raise ProtocolError(protocol.BAD_REQUEST, "name the jobs to cancel (or --all-mine)")
    verb = "cancel it" if sig is None else "signal it"
    jobs = [owned(j, peer, verb) for j in found]  # all checked before any is touched
    if states:
        jobs = [j for j in jobs if j.state in states]
    if len(found) == 1 and mine is None and jobs and jobs[0].state in FINISHED:
        j = jobs[0]
        raise ProtocolError(protocol.INVALID_STATE, f"job {j.id} already ended ({j.state.value})")
    return {"cancelled": front.cancel(jobs, sig)}


async def _hold_release(
    front: Front, peer: Peer, req: dict[str, Any], holding: bool
) -> dict[str, Any]:
    verb = "hold it" if holding else "release it"
    jobs: list[Job] = [owned(j, peer, verb) for j in front.named(req.get("job_ids"))]
    at = None if holding else validate.unix_time("at", req.get("at"))
    return await front.hold(jobs, holding, at)


async def hold_jobs(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    return await _hold_release(front, peer, req, True)


async def release_jobs(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    return await _hold_release(front, peer, req, False)


# -- jobs changed ------------------------------------------------------------------------------
# ``update`` (a pending job changed, checked as submit checks it) and ``resubmit`` (an ended job
# queued again). Who may change or resubmit a job (its owner or an admin) is judged here, for
# each job the engine names, before it changes any.


async def update(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """`berth update`: the pending job (or an array's pending tasks) changed."""

    def allow(job: Job) -> object:
        return owned(job, peer, "update it")

    return await front.update(peer, req["job_id"], req["set"], allow)


async def resubmit(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """`berth resubmit`: an ended job queued again (``cascade``: its doomed dependents)."""

    def allow(job: Job) -> object:
        return owned(job, peer, "resubmit it")

    return await front.resubmit(peer, req["job_id"], bool(req.get("cascade")), allow)
