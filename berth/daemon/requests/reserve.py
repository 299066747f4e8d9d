"""The handlers of admin reservations (docs/admin.md "Reservations"): ``reserve`` and
``unreserve`` (admins), ``reservations`` (anyone reads). Values are checked strictly here (a
user or group must exist in this machine's user database, a window must end in the future
and last at most a year: the engine's front checks the window against its clock); the rules between reservations (no overlap on a GPU, which
GPUs ``-g N`` gets) are :class:`berth.daemon.engine.reservations.Reservations`'.
"""

from __future__ import annotations

import grp
import pwd

from berth.daemon.requests import validate
from berth.daemon.requests.authority import admins_only
from berth.units import MAX_GPU_INDEX
from berth.wire import protocol
from berth.wire.checks import bad, integer, number, text
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine.front import Front
    from berth.daemon.requests.authority import Peer

MAX_HOLDERS = 100  # users, groups or projects named by one reservation


def _names(req: dict[str, Any], field: str) -> list[str]:
    names = validate.strings(field, req.get(field))
    if len(names) > MAX_HOLDERS:
        raise bad(field, names, f"names more than {MAX_HOLDERS}")
    return list(dict.fromkeys(names))


def _holders(req: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    users, groups, projects = (_names(req, f) for f in ("users", "groups", "projects"))
    for u in users:
        try:
            pwd.getpwnam(u)
        except KeyError:
            raise ProtocolError(protocol.BAD_REQUEST, f"no user {u!r} on this machine") from None
    for g in groups:
        try:
            grp.getgrnam(g)
        except KeyError:
            raise ProtocolError(protocol.BAD_REQUEST, f"no group {g!r} on this machine") from None
    if not (users or groups or projects):
        raise ProtocolError(
            protocol.BAD_REQUEST, "name who holds the reservation: --user, --group or --project"
        )
    return users, groups, projects


def reserve(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """Reserve GPUs (``gpus``: named; ``count``: any N, chosen now) from ``start`` to ``end``
    for ``users``, ``groups`` and ``projects``."""
    admins_only(peer, "reserve GPUs")
    users, groups, projects = _holders(req)
    start = number("start", req["start"], 0, 1e11, low_open=False)
    end = number("end", req["end"], 0, 1e11)
    names = validate.gpu_names("gpus", req.get("gpus"))
    count = req.get("count")
    if (count is None) == (not names):
        raise ProtocolError(protocol.BAD_REQUEST, "give either -g N or --gpu-ids, not both")
    if count is not None:
        count = integer("count", count, 1, MAX_GPU_INDEX + 1)
    note = req.get("note")
    entry = {
        "start": start, "end": end, "users": users, "groups": groups, "projects": projects,
        "unlimited": bool(req.get("unlimited")), "by": peer.user,
        "note": None if note is None else text("note", note, limit=200),
    }  # fmt: skip
    return front.reserve(entry, names, count)


def unreserve(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    admins_only(peer, "remove reservations")
    return front.reserve(None, [], None, remove=integer("id", req["id"], 1, 2**63 - 1))


def reservations(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """Every reservation not over (anyone may read them)."""
    return front.reserve(None, [], None)
