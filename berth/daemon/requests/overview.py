"""The daemon read as a whole: ``status``, ``ping`` (its stats) and `berth report`'s figures
over a window (:mod:`berth.daemon.engine.reports`), as the peer may see them. Handlers as
:mod:`berth.daemon.requests.jobs`' (the front, the peer, the request).
"""

from __future__ import annotations

from berth.daemon.report import tally
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable
    from typing import Any

    from berth.daemon.engine.front import Front
    from berth.daemon.requests.authority import Peer


def report(front: Front, peer: Peer, req: dict[str, Any]) -> Awaitable[dict[str, Any]]:
    """`berth report`: the window's figures, as the peer may see them (berth.daemon.engine.reports)."""
    try:
        by = tally.check_by([str(b) for b in req.get("by") or ()])
    except ValueError as e:
        raise ProtocolError(protocol.BAD_REQUEST, str(e)) from None
    return front.view("report", peer, req["since"], req.get("until"), {"rows": by}, by)


def status(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    return front.view("status")


def ping(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    return front.view("stats")
