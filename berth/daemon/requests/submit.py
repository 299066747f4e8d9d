"""The handlers of jobs coming in and changed: ``submit`` and ``submit_all`` (a job as the
client sent it, handed to the engine's admission: :mod:`berth.daemon.engine.admission.admit`,
every check, the queue, the answer once durable), ``update`` (a pending job changed, checked as
submit checks it) and ``resubmit`` (an ended job queued again). Who may change or resubmit a
job (its owner or an admin) is judged here, for each job the engine names, before it changes
any."""

from __future__ import annotations

from berth.daemon.requests.authority import owned

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Awaitable
    from typing import Any

    from berth.core.job import Job
    from berth.daemon.engine.front import Front
    from berth.daemon.requests.authority import Peer


def submit(
    front: Front, peer: Peer, req: dict[str, Any]
) -> asyncio.Future[dict[str, Any]] | Awaitable[dict[str, Any]]:
    """One job (or one array), answered once it is durable (``dry_run``: what it would be)."""
    return front.admit(peer, req["job"], bool(req.get("dry_run")))


async def submit_all(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """A jobs file's jobs, all or none, in one commit; ``env``: of each job naming none."""
    return await front.admit(
        peer, req["jobs"], bool(req.get("dry_run")), each=True, env=req.get("env")
    )


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
