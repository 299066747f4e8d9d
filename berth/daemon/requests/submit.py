"""The ``submit`` and ``submit_all`` handlers: the request's fields read, the job's admission
left to the engine (:mod:`berth.daemon.engine.admission.admit`: every check, the queue, the
answer once durable)."""

from __future__ import annotations

from berth.daemon.engine.admission import admit

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Awaitable
    from typing import Any

    from berth.daemon.engine.engine import Engine
    from berth.daemon.requests.authority import Peer


def submit(
    engine: Engine, peer: Peer, req: dict[str, Any]
) -> asyncio.Future[dict[str, Any]] | Awaitable[dict[str, Any]]:
    """One job (or one array), answered once it is durable (``dry_run``: what it would be)."""
    return admit.submit(engine, peer, req["job"], bool(req.get("dry_run")))


async def submit_all(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """A jobs file's jobs, all or none, in one commit; ``env``: of each job naming none."""
    jobs = await admit.submit_all(
        engine, peer, req["jobs"], req.get("env"), bool(req.get("dry_run"))
    )
    return {"replies": jobs}
