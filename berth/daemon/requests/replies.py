"""What a request is answered: a handler's result (``{"ok": true, ...}``), or its failure as the
error the client maps to a message (:func:`error_reply`: a full disk says so, anything
unforeseen is logged and answered ``INTERNAL``)."""

from __future__ import annotations

import logging

from berth.daemon.engine.diskfull import is_full
from berth.errors import BerthError, Refused, UsageError
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable
    from typing import Any

    from berth.daemon.requests.stream import Stream

log = logging.getLogger("berth.daemon")


async def guard(result: Awaitable[dict[str, Any]]) -> dict[str, Any] | Stream:
    try:
        return {"ok": True, **(await result)}
    except Exception as e:
        return error_reply(e)


def error_reply(e: Exception) -> dict[str, Any]:
    if isinstance(e, ProtocolError):
        return protocol.error(e.code, e.message)
    if isinstance(e, Refused):
        return protocol.error(protocol.NOT_OWNER, str(e))
    if isinstance(e, UsageError):
        return protocol.error(protocol.BAD_REQUEST, str(e))
    if isinstance(e, BerthError):
        return protocol.error(protocol.INVALID_STATE, str(e))
    if is_full(e):
        log.error("request refused: the disk of the state database is full (%s)", e)
        return protocol.error(
            protocol.INVALID_STATE,
            "the daemon's disk is full: its state database cannot grow, so nothing was "
            "queued or changed; ask the admin to free space where the daemon keeps its state "
            "(the jobs already queued are kept)",
        )
    log.exception("request failed", exc_info=e)
    return protocol.error(protocol.INTERNAL, f"internal error: {e!r}")
