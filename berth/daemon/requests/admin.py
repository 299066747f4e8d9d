"""The handlers of what admins do to the daemon: ``pause``/``resume`` GPUs and `berth admin`'s
``limits`` (anyone reads; admins set), ``drain`` and ``undrain``; ``shutdown`` stops it. Drain
is pausing GPUs (:class:`berth.daemon.engine.pauses.Pauses`) with who did it and why, which
pending jobs' reasons then say; undrain is resume.
"""

from __future__ import annotations

import math
import pwd

from berth.daemon.engine.accounts import EVERYONE, KEYS, UNLIMITED
from berth.daemon.requests import validate
from berth.daemon.requests.authority import admins_only
from berth.wire import protocol
from berth.wire.checks import text
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine.front import Front
    from berth.daemon.requests.authority import Peer

# key -> (lowest, highest, integer?)
_RANGES = {
    "max_gpus": (1e-3, 1024.0, False),
    "max_jobs": (1.0, 1e9, True),
    "max_time": (1.0, 366 * 86400.0, False),
    "shares": (1e-3, 1e6, False),
}
_WORDS = ("none", "default")


def _user(raw: Any) -> str:
    if raw is None:
        return EVERYONE
    name = text("user", raw)
    if name == EVERYONE:
        return name

    try:
        pwd.getpwnam(name)
    except KeyError:
        raise ProtocolError(protocol.BAD_REQUEST, f"no user {name!r} on this machine") from None
    return name


def _changes(raw: dict[str, Any]) -> dict[str, float | str]:
    out: dict[str, float | str] = {}
    for key, value in raw.items():
        if key not in _RANGES:
            raise ProtocolError(
                protocol.BAD_REQUEST, f"unknown limit {key!r}; known: {', '.join(KEYS)}"
            )
        if value in _WORDS:
            if key == "shares" and value == "none":
                raise ProtocolError(protocol.BAD_REQUEST, "shares: give a weight, or 'default'")
            out[key] = UNLIMITED if value == "none" else "default"
            continue
        low, high, integer = _RANGES[key]
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or not low <= value <= high:
            raise ProtocolError(
                protocol.BAD_REQUEST,
                f"{key} = {value!r}: must be a number from {low:g} to {high:g}, 'none' or "
                "'default'",
            )
        if integer and value != int(value):
            raise ProtocolError(protocol.BAD_REQUEST, f"{key} = {value!r}: must be a whole number")
        out[key] = float(value)
    return out


def limits(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """Read the limits (anyone), or set them (``set``: admins)."""
    user = _user(req.get("user"))
    changes = None
    if req.get("set"):
        who = "everyone's" if user == EVERYONE else f"{user}'s"
        admins_only(peer, f"change {who} limits")
        changes = _changes(req["set"])
    return front.limits(None if user == EVERYONE else user, changes)


def projects(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """`berth admin projects` (anyone reads): each project's usage, quotas and members."""
    return front.view("projects")


def pause(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """Pause GPUs: nothing new starts there (`berth pause`). With a ``note`` (`berth admin
    drain`, the CLI's other name for it): all of them if none is named, and who and why kept."""
    if "note" in req:
        return _drain(front, peer, req)
    admins_only(peer, "pause GPUs")
    if not req.get("gpus"):
        raise ProtocolError(protocol.BAD_REQUEST, "name the GPUs to pause, e.g. `berth pause 0 3`")
    return front.pause(peer.user, validate.gpu_names("gpus", req["gpus"]))


def resume(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    admins_only(peer, "resume GPUs")
    names = validate.gpu_names("gpus", req.get("gpus"))
    return front.pause(peer.user, names, resume=True, everything=bool(req.get("all")))


def _drain(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """Pause GPUs (all of them without a list) and record who and why."""
    admins_only(peer, "drain GPUs")
    names = validate.gpu_names("gpus", req.get("gpus"))
    note = req.get("note")
    if note is not None:
        note = text("note", note, empty=True, limit=200) or None
    return front.pause(peer.user, names, note, drain=True)


def enforce_log(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """`berth admin log`: the last entries of the enforcement audit log (admins only)."""
    admins_only(peer, "read the enforcement log")
    limit = req.get("limit", 50)
    if not 1 <= limit <= 10000:
        raise ProtocolError(protocol.BAD_REQUEST, f"limit {limit} must be in 1..10000")
    return front.view("enforce_log", limit)


def shutdown(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    admins_only(peer, "stop the daemon")
    return {"stopping": True, "running_jobs": front.stop()}
