"""`berth report`'s arithmetic, pure (no I/O, no clock): job records -> per-day pieces, pieces
-> the rows of a report.

A **piece** is what one job (or the summaries of pruned jobs, or the dashboard's minutes of
claims outside the queue and of outside use) contributes to one UTC day: its keys (day,
kind, user, project, model, state) and its sums (jobs that ended, GPU-seconds held,
seconds waited, and of the held GPU-seconds those the dashboard sampled, with their
utilisation and memory weighed by time). The summaries table keeps exactly these
(:mod:`berth.daemon.store.summaries`), so a report reads pruned history and live records
alike and they add up the same.

A job's GPU-seconds are each attempt's ``[start, end)`` (``now`` while it runs) times its GPUs
times its share, clipped to the report's window and cut at UTC midnights. Its waiting is
from submission to the first start and between attempts (a retry's backoff, a requeue),
clipped alike. A job counts once, on the day it ended (with its end state).
"""

from __future__ import annotations

import datetime
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    Piece = dict[str, Any]

DAY = 86400.0
HOUR = 3600.0
KEYS = ("day", "kind", "user", "project", "model", "state")
SUMS = ("jobs", "gpu_seconds", "queued_seconds", "sampled", "util", "mem")
BY = ("user", "project", "model", "day", "week", "month")
KINDS = ("job", "claim", "outside")
IDLE_UTIL = 5.0  # percent: a job below this mean utilisation over its sampled time is idle
IDLE_COVER = 0.5  # ... when at least this part of its GPU-seconds was sampled


def day_of(t: float) -> float:
    """The start of the UTC day holding ``t``."""
    return (t // DAY) * DAY


def _split(
    lo: float, hi: float, since: float, until: float, unit: float = DAY
) -> list[tuple[float, float]]:
    """``[lo, hi)`` clipped to ``[since, until)``: (start, seconds) for each UTC day (or
    other ``unit``: an hour) it covers."""
    lo, hi = max(lo, since), min(hi, until)
    out: list[tuple[float, float]] = []
    while hi > lo:
        start = (lo // unit) * unit
        cut = min(hi, start + unit)
        out.append((start, cut - lo))
        lo = cut
    return out


def claim_pieces(
    user: str, gpus: float, start: float, end: float, since: float, until: float
) -> list[Piece]:
    """A claim outside the queue: ``gpus`` held from ``start`` to ``end`` (as the daemon saw
    it), per hour (the summaries keep claims by the hour), clipped to the window."""
    return [
        {"day": hour, "kind": "claim", "user": user, "project": "", "model": "", "state": "",
         **dict.fromkeys(SUMS, 0.0), "jobs": 0, "gpu_seconds": secs * gpus}
        for hour, secs in _split(start, end, since, until, HOUR)
    ]  # fmt: skip


def waits(job: Mapping[str, Any], now: float) -> list[tuple[float, float]]:
    """The intervals ``job`` waited in the queue: submission to its first start, an attempt's
    end to the next one's start, the last end (or submission) to its end (a job cancelled
    while it waited again after an attempt) or to ``now`` while it still waits."""
    out: list[tuple[float, float]] = []
    at = float(job["submit_time"])
    for a in job.get("attempts") or ():
        out.append((at, float(a["start"])))
        if a.get("end") is None:
            return out
        at = float(a["end"])
    state = job.get("state")
    if state == "PENDING":
        out.append((at, now))
    elif job.get("ended_at") is not None and float(job["ended_at"]) > at:
        out.append((at, float(job["ended_at"])))  # (ended while waiting: cancelled, say)
    return out


def job_pieces(
    job: Mapping[str, Any],
    since: float,
    until: float,
    now: float,
    models: Mapping[int, str],
    usage: Mapping[str, float] | None = None,
) -> list[Piece]:
    """What ``job`` (its record's dict, with ``ended_at``: None while unfinished) gives the
    window ``[since, until)``. ``models``: GPU index -> model name. ``usage``: its sampled
    totals (``sampled``, ``util``, ``mem``: :class:`berth.web.usage.Usage`), spread over its
    pieces in proportion to their GPU-seconds."""
    state = str(job.get("state") or "")
    base = {"kind": "job", "user": str(job.get("user") or ""),
            "project": str(job.get("project") or ""), "state": state}  # fmt: skip
    out: dict[tuple[float, str], Piece] = {}

    def piece(day: float, model: str) -> Piece:
        p = out.get((day, model))
        if p is None:
            p = out[day, model] = {"day": day, **base, "model": model, **dict.fromkeys(SUMS, 0)}
        return p

    held = 0.0
    for a in job.get("attempts") or ():
        gpus = [int(g) for g in a.get("gpus") or ()]
        end = now if a.get("end") is None else float(a["end"])
        weight = len(gpus) * float(a.get("share") or 1.0)
        held += max(0.0, end - float(a["start"])) * weight
        if not gpus:
            continue
        model = " + ".join(sorted({models.get(g, "?") for g in gpus}))
        for day, secs in _split(float(a["start"]), end, since, until):
            piece(day, model)["gpu_seconds"] += secs * weight
    first = (job.get("attempts") or [{}])[0].get("gpus") or ()
    wait_model = " + ".join(sorted({models.get(int(g), "?") for g in first})) if first else ""
    for lo, hi in waits(job, now):
        for day, secs in _split(lo, hi, since, until):
            piece(day, wait_model)["queued_seconds"] += secs
    ended = job.get("ended_at")
    if ended is not None and since <= float(ended) < until and state not in ("", "PENDING"):
        last = (job.get("attempts") or [{}])[-1].get("gpus") or ()
        model = " + ".join(sorted({models.get(int(g), "?") for g in last})) if last else ""
        piece(day_of(float(ended)), model)["jobs"] += 1
    if usage and held > 0:
        for p in out.values():
            part = p["gpu_seconds"] / held
            for key in ("sampled", "util", "mem"):
                p[key] += float(usage.get(key) or 0.0) * part
    return list(out.values())


def period(day: float, by: str) -> str:
    """The label of the day, ISO week or month holding UTC day ``day``."""
    t = time.gmtime(day)
    if by == "day":
        return time.strftime("%Y-%m-%d", t)
    if by == "week":
        year, week, _ = datetime.date(t.tm_year, t.tm_mon, t.tm_mday).isocalendar()
        return f"{year}-W{week:02d}"
    return time.strftime("%Y-%m", t)


def _row_key(p: Piece, by: Iterable[str]) -> tuple[str, ...]:
    return tuple(period(p["day"], b) if b in ("day", "week", "month") else str(p[b]) for b in by)


def _finish(acc: dict[str, Any]) -> dict[str, Any]:
    """Sums -> the figures shown: hours, mean utilisation and memory over the sampled time."""
    sampled = acc["sampled"]
    return {
        **{k: v for k, v in acc.items() if k not in SUMS},
        "jobs": acc["jobs"],
        "gpu_hours": round(acc["gpu_seconds"] / 3600, 4),
        "queued_hours": round(acc["queued_seconds"] / 3600, 4),
        "sampled_hours": round(sampled / 3600, 4),
        "util": round(acc["util"] / sampled, 1) if sampled else None,
        "mem": round(100 * acc["mem"] / sampled, 1) if sampled else None,
    }


def group(pieces: Iterable[Piece], by: list[str], kind: str = "job") -> list[dict[str, Any]]:
    """The rows of one ``kind`` grouped by ``by`` (in that order; none: one row), sorted by
    their keys; each with its end states (``states``: state -> jobs)."""
    rows: dict[tuple[str, ...], dict[str, Any]] = {}
    for p in pieces:
        if p["kind"] != kind:
            continue
        key = _row_key(p, by)
        acc = rows.get(key)
        if acc is None:
            acc = rows[key] = {**dict(zip(by, key, strict=True)), **dict.fromkeys(SUMS, 0.0),
                               "states": {}}  # fmt: skip
        for s in SUMS:
            acc[s] += p[s]
        if p["jobs"]:
            acc["states"][p["state"]] = acc["states"].get(p["state"], 0) + int(p["jobs"])
    out = []
    for key in sorted(rows):
        acc = rows[key]
        acc["jobs"] = int(acc["jobs"])
        out.append(_finish(acc))
    return out


def idle(
    jobs: Iterable[Mapping[str, Any]],
    usage: Mapping[int, Mapping[str, float]],
    held: Mapping[int, float],
) -> list[dict[str, Any]]:
    """Jobs that held GPUs and barely used them: mean utilisation under :data:`IDLE_UTIL` %
    over a sampled part of at least :data:`IDLE_COVER` of their GPU-seconds (``held``: job id
    -> GPU-seconds in the window), most GPU-hours first."""
    out = []
    for j in jobs:
        u, secs = usage.get(int(j["id"])), held.get(int(j["id"]), 0.0)
        if not u or secs <= 0 or not u.get("sampled"):
            continue
        mean = float(u["util"]) / float(u["sampled"])
        if mean < IDLE_UTIL and float(u["sampled"]) >= IDLE_COVER * secs:
            out.append({"id": j["id"], "user": j.get("user"), "name": j.get("name") or "",
                        "gpu_hours": round(secs / 3600, 4), "util": round(mean, 1)})  # fmt: skip
    return sorted(out, key=lambda r: (-r["gpu_hours"], r["id"]))


def check_by(by: list[str]) -> list[str]:
    """``--by``'s keys, checked: each one of :data:`BY`, none twice."""
    for b in by:
        if b not in BY:
            raise ValueError(f"--by {b!r}: not a grouping; use {', '.join(BY)} (combinable)")
    if len(set(by)) != len(by):
        raise ValueError(f"--by {','.join(by)}: a grouping is named twice")
    return list(by)
