"""The ``report`` request (`berth report`): GPU-hours, waiting, end states and efficiency over
a window, grouped as asked, from the job records on file, the summaries of pruned ones
(:mod:`berth.daemon.store.summaries`) and the jobs still running; claims outside the queue
and outside use apart. The arithmetic is :mod:`berth.daemon.report.tally`.

Who sees what (from the peer, never the message): an admin, or the daemon's own user, every
user's rows; anyone else their own rows and the totals of everyone (which name nobody), and
only their own jobs among the idle holders.
"""

from __future__ import annotations

import math
import os

from berth.daemon.report import tally
from berth.daemon.store import summaries
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine.engine import Engine
    from berth.daemon.requests.authority import Peer

MAX_SPAN = 3 * 366 * 86400.0  # the widest window asked at once


def _window(req: dict[str, Any], now: float) -> tuple[float, float]:
    since = float(req["since"])
    until = now if req.get("until") is None else float(req["until"])
    if not (math.isfinite(since) and math.isfinite(until)) or since < 0:
        raise ProtocolError(
            protocol.BAD_REQUEST, f"report: window {since!r}..{until!r} is not a time"
        )
    if until <= since:
        raise ProtocolError(
            protocol.BAD_REQUEST,
            f"report: --until ({until:.0f}) must come after --since ({since:.0f})",
        )
    if until - since > MAX_SPAN:
        raise ProtocolError(protocol.BAD_REQUEST, "report: a window of at most 3 years, please")
    return since, min(until, now)


def report(engine: Engine, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    now = engine.clock.time()
    since, until = _window(req, now)
    try:
        by = tally.check_by([str(b) for b in req.get("by") or ()])
    except ValueError as e:
        raise ProtocolError(protocol.BAD_REQUEST, str(e)) from None
    everyone = peer.admin or peer.uid == os.geteuid()
    models = {s.index: s.name for s in engine.res.snapshots}
    jobs = summaries.finished(engine.store, since, until)
    jobs += [{**j.to_dict(), "ended_at": None} for j in engine.unfinished()
             if j.submit_time < until]  # fmt: skip
    used = summaries.usage(engine.store, [int(j["id"]) for j in jobs])
    pieces: list[tally.Piece] = []
    held: dict[int, float] = {}
    for j in jobs:
        mine = tally.job_pieces(j, since, until, now, models, used.get(int(j["id"])))
        held[int(j["id"])] = sum(p["gpu_seconds"] for p in mine)
        pieces += mine
    # Summarized days (each whole): those the window overlaps, the one it starts in only if
    # it starts in that day's first half.
    first = tally.day_of(since)
    pieces += summaries.read(engine.store, first if since - first < tally.DAY / 2
                             else first + tally.DAY, until)  # fmt: skip
    own = [p for p in pieces if everyone or p["user"] == peer.user]
    idle = tally.idle([j for j in jobs if everyone or j.get("user") == peer.user], used, held)
    out: dict[str, Any] = {
        "since": since,
        "until": until,
        "by": by,
        "scope": "all" if everyone else peer.user,
        "rows": tally.group(own, by),
        "totals": (tally.group(pieces, []) or [_empty()])[0],
        "idle": idle,
    }
    for kind in ("claim", "outside"):
        out[kind + "s"] = tally.group(own, [b for b in by if b not in ("project", "model")] or
                                      ["user"], kind)  # fmt: skip
    return out


def _empty() -> dict[str, Any]:
    return tally.group([{"day": 0.0, "kind": "job", "user": "", "project": "", "model": "",
                         "state": "", **dict.fromkeys(tally.SUMS, 0)}], [])[0]  # fmt: skip
