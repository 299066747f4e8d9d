"""The handlers of admin reservations (docs/admin.md "Reservations"): ``reserve`` and
``unreserve`` (admins), ``reservations`` (anyone reads). Values are checked strictly here (a
user or group must exist in this machine's user database, a window must end in the future
and last at most :data:`MAX_SPAN`); the rules between reservations (no overlap on a GPU, which
GPUs ``-g N`` gets) are :class:`berth.daemon.engine.reservations.Reservations`'.
"""

from __future__ import annotations

import grp
import pwd

from berth.daemon.engine.reservations import when
from berth.daemon.requests import validate
from berth.daemon.requests.admin import gpu_uuids
from berth.daemon.requests.authority import admins_only
from berth.units import MAX_GPU_INDEX, format_duration
from berth.wire import protocol
from berth.wire.checks import bad, integer, number, text
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine.engine import Engine
    from berth.daemon.requests.authority import Peer

MAX_SPAN = 366 * 86400.0  # the longest window, and how far ahead one may start
MAX_RESERVATIONS = 1000  # kept at once (each pass reads them all)
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


def reserve(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """Reserve GPUs (``gpus``: named; ``count``: any N, chosen now) from ``start`` to ``end``
    for ``users``, ``groups`` and ``projects``."""
    admins_only(peer, engine.opts, "reserve GPUs")
    now = engine.clock.time()
    users, groups, projects = _holders(req)
    start = number("start", req["start"], 0, 1e11, low_open=False)
    if start > now + MAX_SPAN:
        raise bad("start", start, f"{when(start)} is more than {format_duration(MAX_SPAN)} away")
    end = number("end", req["end"], 0, 1e11)
    if end <= start:
        raise bad("end", end, f"must be after the start ({when(start)})")
    if end <= now:
        raise bad("end", end, f"{when(end)} has passed: a reservation must end in the future")
    if end - start > MAX_SPAN:
        raise bad("end", end, f"the window may last at most {format_duration(MAX_SPAN)}")
    names = validate.gpu_names("gpus", req.get("gpus"))
    count = req.get("count")
    if (count is None) == (not names):
        raise ProtocolError(protocol.BAD_REQUEST, "give either -g N or --gpu-ids, not both")
    if count is not None:
        count = integer("count", count, 1, MAX_GPU_INDEX + 1)
    if len(engine.reservations.entries) >= MAX_RESERVATIONS:
        raise ProtocolError(
            protocol.BAD_REQUEST,
            f"{MAX_RESERVATIONS} reservations are kept already: `berth admin unreserve` some",
        )
    note = req.get("note")
    entry = {
        "start": start, "end": end, "uuids": gpu_uuids(engine, names) if names else [],
        "users": users, "groups": groups, "projects": projects,
        "unlimited": bool(req.get("unlimited")), "by": peer.user,
        "note": None if note is None else text("note", note, limit=200), "made": now,
    }  # fmt: skip
    kept = engine.reservations.add(entry, count, now)
    return {"reservation": next(v for v in engine.reservations.view(now) if v["id"] == kept["id"])}


def unreserve(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    admins_only(peer, engine.opts, "remove reservations")
    rid = integer("id", req["id"], 1, 2**63 - 1)
    entry = engine.reservations.remove(rid)
    return {"removed": rid, "described": engine.reservations.describe(entry)}


def reservations(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """Every reservation not over (anyone may read them)."""
    now = engine.clock.time()
    return {"now": now, "reservations": engine.reservations.view(now)}
