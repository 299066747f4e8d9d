"""The handlers of what admins do to the daemon: ``pause``/``resume`` GPUs and `berth admin`'s
``limits`` (anyone reads; admins set), ``drain`` and ``undrain``. Drain is pausing GPUs
(:class:`berth.daemon.engine.pauses.Pauses`) with who did it and why, which pending jobs'
reasons then say; undrain is resume.
"""

from __future__ import annotations

import math
import pwd

from berth.daemon.engine.accounts import EVERYONE, KEYS, UNLIMITED
from berth.daemon.engine.enforce_io import read_log
from berth.daemon.requests import validate
from berth.daemon.requests.authority import admins_only
from berth.wire import protocol
from berth.wire.checks import text
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


def projects(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """`berth admin projects` (anyone reads): each project's usage, quotas and members."""
    p = engine.accounts.projects
    return {
        "projects": p.summary(engine.unfinished(), engine.clock.time()),
        "require_project": p.require,
        "default_project": p.default,
    }


def gpu_uuids(engine: Engine, names: list[Any]) -> list[str]:
    """The uuids of the GPUs a request names (index, uuid...); an unknown one is refused."""
    out = []
    for n in names:
        s = engine.res.resolve(str(n))
        if s is None:
            known = ", ".join(str(g) for g in sorted(engine.res.by_index)) or "none"
            raise ProtocolError(protocol.NO_SUCH_GPU, f"no GPU {n!r} here (GPUs: {known})")
        out.append(s.uuid)
    return out


def pause(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    admins_only(peer, engine.opts, "pause GPUs")
    uuids = gpu_uuids(engine, validate.gpu_names("gpus", req["gpus"]))
    # (`berth admin drain` says why too)
    engine.pauses.pause(uuids, peer.user, None, engine.clock.time())
    return {"paused": sorted(engine.pauses.indexes())}


def resume(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    admins_only(peer, engine.opts, "resume GPUs")
    names = validate.gpu_names("gpus", req.get("gpus"))
    everything = bool(req.get("all"))
    uuids = list(engine.pauses.gpus) if everything else gpu_uuids(engine, names)
    engine.pauses.resume(uuids, queue=everything)
    return {"paused": sorted(engine.pauses.indexes()), "queue_paused": engine.pauses.queue}


def drain(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """Pause GPUs (all of them without a list) and record who and why."""
    admins_only(peer, engine.opts, "drain GPUs")
    names = validate.gpu_names("gpus", req.get("gpus"))
    uuids = gpu_uuids(engine, names) if names else [s.uuid for s in engine.res.snapshots]
    note = req.get("note")
    if note is not None:
        note = text("note", note, empty=True, limit=200) or None
    engine.pauses.pause(uuids, peer.user, note, engine.clock.time())
    return _paused(engine)


def undrain(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """Resume GPUs: exactly `berth resume`."""
    return resume(engine, peer, req)


def _paused(engine: Engine) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for u in engine.pauses.gpus:
        s = engine.res.by_uuid.get(u)
        if s is None:
            continue
        by, note, since = engine.pauses.notes.get(u, (None, None, None))
        out.append({"gpu": s.index, "by": by, "note": note, "since": since})
    out.sort(key=lambda r: r["gpu"])
    return {"paused": [r["gpu"] for r in out], "drained": out}


def enforce_log(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """`berth admin log`: the last entries of the enforcement audit log (admins only)."""
    admins_only(peer, engine.opts, "read the enforcement log")
    limit = req.get("limit", 50)
    if not 1 <= limit <= 10000:
        raise ProtocolError(protocol.BAD_REQUEST, f"limit {limit} must be in 1..10000")
    enforcer = engine.enforcer
    path = enforcer.audit_path if enforcer is not None else ""
    devices = enforcer.devices if enforcer is not None else ""
    return {"path": path, "entries": read_log(path, limit) if path else [], "devices": devices}
