"""What `berth report` and the page's Usage tab ask (the front's ``report`` verb): GPU-hours, waiting, end states and efficiency over
a window, grouped as asked, from the job records on file, the summaries of pruned ones
(:mod:`berth.daemon.store.summaries`) and the jobs still running; claims outside the queue
and outside use apart. The arithmetic is :mod:`berth.daemon.report.tally`.

Who sees what (from the peer, never the message): an admin, or the daemon's own user, every
user's rows; anyone else their own rows and the totals of everyone (which name nobody), and
only their own jobs among the idle holders.

The records are read and tallied on a thread of its own (one report at a time), on a
connection of its own: a month of a busy queue's records takes seconds (about 3 s for
100,000 jobs), and the loop goes on scheduling meanwhile.
"""

from __future__ import annotations

import asyncio
import math
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor

from berth.daemon.report import tally
from berth.daemon.store import summaries
from berth.daemon.store.store import Store
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine.admission.prepared import Caller as Peer
    from berth.daemon.engine.engine import Engine

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


class Ask:
    """One report's question, taken on the loop (the window, the peer, the running jobs as
    they are now), answered on the report thread (:func:`answer`)."""

    __slots__ = (
        "by", "claims", "everyone", "live", "models", "now", "path", "since", "until", "user",
    )  # fmt: skip

    def __init__(self, engine: Engine, peer: Peer, since: float, until: float, now: float) -> None:
        self.path = engine.store.path
        self.since, self.until, self.now = since, until, now
        self.everyone = peer.admin or peer.uid == os.geteuid()
        # (rows are users' names: the dashboard's anonymous viewers, uid -1, own none of
        # them, not even those of a Unix user named "anonymous")
        self.user: str | None = peer.user if peer.uid >= 0 else None
        self.models = {s.index: s.name for s in engine.res.snapshots}
        self.live = [{**j.to_dict(), "ended_at": None} for j in engine.unfinished()
                     if j.submit_time < until]  # fmt: skip
        self.by: list[str] = []
        self.claims = list(engine.accounts.outside.live.values())  # (user, GPUs, first seen)


def _gather(
    ask: Ask,
) -> tuple[list[tally.Piece], list[dict[str, Any]], dict[int, Any], dict[int, float]]:
    """Every piece of the window: the finished jobs on record (read on a connection of this
    thread's own), the running ones, the summarized days."""
    store = Store(sqlite3.connect(ask.path, timeout=10.0, isolation_level=None), ask.path)
    try:
        store.db.execute("BEGIN")  # (one snapshot: a purge moves jobs into summaries at once)
        since, until = ask.since, ask.until
        jobs = summaries.finished(store, since, until)
        on_file = {int(j["id"]) for j in jobs}  # (a job whose end was just committed: once)
        jobs += [j for j in ask.live if int(j["id"]) not in on_file]
        used = summaries.usage(store, [int(j["id"]) for j in jobs])
        pieces: list[tally.Piece] = []
        held: dict[int, float] = {}
        for j in jobs:
            mine = tally.job_pieces(j, since, until, ask.now, ask.models, used.get(int(j["id"])))
            held[int(j["id"])] = sum(p["gpu_seconds"] for p in mine)
            pieces += mine
        pieces += summaries.read(store, since, until)  # (pruned jobs' days; claims' hours)
        for user, gpus, first in ask.claims:  # (claims outside the queue still held)
            pieces += tally.claim_pieces(user, gpus, first, ask.now, since, until)
        store.db.execute("COMMIT")
    finally:
        store.close()
    return pieces, jobs, used, held


def answer(ask: Ask, groupings: dict[str, list[str]]) -> dict[str, Any]:
    """The report (on the report thread): for each of ``groupings`` (name -> its --by keys)
    the rows the asker may see, with the totals, claims, outside use and idle holders."""
    pieces, jobs, used, held = _gather(ask)
    own = [p for p in pieces if ask.everyone or (ask.user is not None and p["user"] == ask.user)]
    mine = [j for j in jobs if ask.everyone or (ask.user is not None and j.get("user") == ask.user)]
    out: dict[str, Any] = {
        "since": ask.since,
        "until": ask.until,
        "by": ask.by,
        "scope": "all" if ask.everyone else (ask.user or "anonymous"),
        "totals": (tally.group(pieces, []) or [_empty()])[0],
        "idle": tally.idle(mine, used, held),
    }
    for name, by in groupings.items():
        out[name] = tally.group(own, by)
    for kind in ("claim", "outside"):
        keys = [b for b in ask.by if b not in ("project", "model")] or ["user"]
        out[kind + "s"] = tally.group(own, keys, kind)
    return out


def ask(engine: Engine, peer: Peer, since: float, until: float | None, by: list[str]) -> Ask:
    now = engine.clock.time()
    q = Ask(engine, peer, *_window({"since": since, "until": until}, now), now)
    q.by = by
    return q


def run(q: Ask, groupings: dict[str, list[str]]) -> asyncio.Future[dict[str, Any]]:
    """:func:`answer` on the report thread, one report at a time: reading a month of
    records takes seconds on a big queue, and the loop schedules meanwhile."""
    global _thread
    if _thread is None:
        _thread = ThreadPoolExecutor(1, thread_name_prefix="berth-report")
    return asyncio.get_running_loop().run_in_executor(_thread, answer, q, groupings)


_thread: ThreadPoolExecutor | None = None


def _empty() -> dict[str, Any]:
    return tally.group([{"day": 0.0, "kind": "job", "user": "", "project": "", "model": "",
                         "state": "", **dict.fromkeys(tally.SUMS, 0)}], [])[0]  # fmt: skip
