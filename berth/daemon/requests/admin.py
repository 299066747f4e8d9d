"""The handlers of `berth admin`: ``limits`` (anyone reads; admins set), ``drain`` and
``undrain`` (admins). Drain is pausing GPUs (:func:`berth.daemon.requests.handlers.pause`'s table and
set) with who did it and why, which pending jobs' reasons then say; undrain is resume.
"""

from __future__ import annotations

import math
import pwd

from berth.daemon.engine.accounts import EVERYONE, KEYS, UNLIMITED
from berth.daemon.requests import validate
from berth.daemon.requests.authority import admins_only
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine.engine import Engine
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
    name = validate.text("user", raw)
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


def limits(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """Read the limits (anyone), or set them (``set``: admins)."""
    user = _user(req.get("user"))
    accounts = engine.accounts
    if req.get("set"):
        who = "everyone's" if user == EVERYONE else f"{user}'s"
        admins_only(peer, engine.opts, f"change {who} limits")
        accounts.set(engine.store, user, _changes(req["set"]))
        engine.kick()  # (a raised limit may let jobs start)
    return accounts.table(None if user == EVERYONE else user)


def drain(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """Pause GPUs (all of them without a list) and record who and why."""
    admins_only(peer, engine.opts, "drain GPUs")
    from berth.daemon.requests.handlers import _gpus  # cycle: handlers imports this module

    names = validate.gpu_names("gpus", req.get("gpus"))
    uuids = _gpus(engine, names) if names else [s.uuid for s in engine.res.snapshots]
    note = req.get("note")
    if note is not None:
        note = validate.text("note", note, empty=True, limit=200) or None
    pause_gpus(engine, peer, uuids, note)
    return _paused(engine)


def pause_gpus(engine: Engine, peer: Peer, uuids: list[str], note: str | None) -> None:
    """Pause GPUs (`berth pause`, `berth admin drain`), recording who and why."""
    with engine.store.tx():
        for u in uuids:
            engine.store.set_paused(u, True, peer.user, note)
    now = engine.clock.time()
    for u in uuids:
        old = engine.pause_notes.get(u) if u in engine.paused else None
        engine.pause_notes[u] = (peer.user, note, now if old is None else old[2])
    engine.paused.update(uuids)
    engine.kick()  # (reasons change)


def undrain(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """Resume GPUs: exactly `berth resume`."""
    from berth.daemon.requests.handlers import resume  # cycle: handlers imports this module

    return resume(engine, peer, req)


def drained(engine: Engine) -> str:
    """Who drained the paused GPUs and why, for the reasons of jobs waiting for them
    (``GpuPaused``): "; drained by root: driver upgrade" (per GPU when they differ)."""
    if not engine.pause_notes:
        return ""
    notes = {}
    for u in engine.paused:
        by, note, _ = engine.pause_notes.get(u, (None, None, 0.0))
        s = engine.res.by_uuid.get(u)
        if by is not None and s is not None:
            notes[s.index] = f"drained by {by}" + (f": {note}" if note else "")
    if not notes:
        return ""
    if len(set(notes.values())) == 1 and len(notes) == len(engine.paused):
        return "; " + next(iter(notes.values()))
    return "".join(f"; GPU {i} {text}" for i, text in sorted(notes.items()))


def _paused(engine: Engine) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for u in engine.paused:
        s = engine.res.by_uuid.get(u)
        if s is None:
            continue
        by, note, since = engine.pause_notes.get(u, (None, None, None))
        out.append({"gpu": s.index, "by": by, "note": note, "since": since})
    out.sort(key=lambda r: r["gpu"])
    return {"paused": [r["gpu"] for r in out], "drained": out}
