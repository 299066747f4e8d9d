"""History that survives pruning (schema 9): the ``summaries`` table, one row per UTC day,
kind, user, project, GPU model and end state with the sums of
:mod:`berth.daemon.report.tally`, and ``job_usage``, each job's sampled utilisation.

Finished jobs beyond ``keep_finished`` are summarized in the same commit that deletes them
(:meth:`berth.daemon.engine.control.Control.purge_finished` with :func:`summarize`), and
claims outside the queue are added by the hour as they end (the engine's ledger scans), and
the dashboard adds its minutes of outside use (:mod:`berth.web.usage`, per hour), so a
report reaches back :data:`KEEP_DAYS` days while the jobs table stays bounded. Summary rows older than that are dropped with the next purge.
"""

from __future__ import annotations

import json

from berth.daemon.report.tally import KEYS, SUMS, claim_pieces, job_pieces

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from berth.daemon.report.tally import Piece
    from berth.daemon.store.store import Store

KEEP_DAYS = 400  # a year of history, and the month or so before it
DAY = 86400.0
HOUR = 3600.0  # claims' and outside use's rows: one per hour

# Adds a piece to its day's row (a second purge of the same day adds to it).
ADD_SQL = (
    f"INSERT INTO summaries({', '.join(KEYS + SUMS)}) "
    f"VALUES ({', '.join('?' * len(KEYS + SUMS))}) "
    f"ON CONFLICT({', '.join(KEYS)}) DO UPDATE SET "
    + ", ".join(f"{s} = {s} + excluded.{s}" for s in SUMS)
)
PRUNE_SQL = "DELETE FROM summaries WHERE day < ?"

# A job's sampled totals grow each minute the dashboard samples it (berth.web.usage).
USAGE_SQL = (
    "INSERT INTO job_usage(id, sampled, util, mem, peak_util, peak_mem) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
    "sampled = sampled + excluded.sampled, util = util + excluded.util, "
    "mem = mem + excluded.mem, peak_util = max(peak_util, excluded.peak_util), "
    "peak_mem = max(peak_mem, excluded.peak_mem)"
)


def rows(pieces: Iterable[Piece]) -> list[tuple[Any, ...]]:
    """The pieces as :data:`ADD_SQL`'s rows."""
    return [tuple(p[k] for k in KEYS + SUMS) for p in pieces]


def claims(ended: Iterable[tuple[str, float, float]], now: float) -> list[tuple[Any, ...]]:
    """The summary rows of claims outside the queue that ended by ``now``: (user, GPUs,
    first seen) each (:class:`berth.daemon.engine.claimers.Claimers`), by the hour."""
    out: list[Piece] = []
    for user, gpus, since in ended:
        out += claim_pieces(user, gpus, since, now, float("-inf"), float("inf"))
    return rows(out)


def read(store: Store, since: float, until: float) -> list[Piece]:
    """The summary rows the window ``[since, until)`` counts: pruned jobs' UTC days (each
    whole: those it overlaps, the one it starts in only if it starts in that day's first
    half), and the hours of claims and outside use (``day`` is the hour's start there; the
    same rule by the hour)."""
    cur = store.db.execute(
        f"SELECT {', '.join(KEYS + SUMS)} FROM summaries WHERE day < ? AND "
        "((kind = 'job' AND day >= ?) OR (kind != 'job' AND day >= ?))",
        (until, _first(since, DAY), _first(since, HOUR)),
    )
    return [dict(zip(KEYS + SUMS, r, strict=True)) for r in cur]


def _first(since: float, unit: float) -> float:
    first = (since // unit) * unit
    return first if since - first < unit / 2 else first + unit


def usage(store: Store, ids: Iterable[int]) -> dict[int, dict[str, float]]:
    """job id -> its sampled totals (``sampled``, ``util``, ``mem``, ``peak_util``,
    ``peak_mem``), for the jobs of ``ids`` the dashboard sampled."""
    out: dict[int, dict[str, float]] = {}
    wanted = list(ids)
    for i in range(0, len(wanted), 500):
        chunk = wanted[i : i + 500]
        cur = store.db.execute(
            "SELECT id, sampled, util, mem, peak_util, peak_mem FROM job_usage "
            f"WHERE id IN ({', '.join('?' * len(chunk))})",
            chunk,
        )
        for r in cur:
            out[int(r[0])] = {"sampled": float(r[1]), "util": float(r[2]), "mem": float(r[3]),
                              "peak_util": float(r[4]), "peak_mem": float(r[5])}  # fmt: skip
    return out


def finished(store: Store, since: float, until: float) -> list[dict[str, Any]]:
    """Finished jobs on record that may count in ``[since, until)``: ended at or after
    ``since``, submitted before ``until``; each its record's dict with ``ended_at``."""
    cur = store.db.execute(
        "SELECT data, ended_at FROM jobs WHERE state NOT IN ('PENDING', 'RUNNING', "
        "'COMPLETING') AND ended_at >= ? AND submitted_at < ? ORDER BY id",
        (since, until),
    )
    out = []
    for data, ended in cur:
        job = json.loads(data)
        job["ended_at"] = ended
        out.append(job)
    return out


def summarize(store: Store, ids: list[int], models: Mapping[int, str]) -> list[tuple[Any, ...]]:
    """The summary rows (:data:`ADD_SQL`) of finished jobs ``ids``, about to be pruned: all of
    their time, on the days it fell."""
    pieces: list[Piece] = []
    used = usage(store, ids)
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        cur = store.db.execute(
            f"SELECT id, data, ended_at FROM jobs WHERE id IN ({', '.join('?' * len(chunk))})",
            chunk,
        )
        for job_id, data, ended in cur:
            job = json.loads(data)
            job["ended_at"] = ended
            end = float(ended or 0.0)
            pieces += job_pieces(job, float("-inf"), float("inf"), end, models,
                                 used.get(int(job_id)))  # fmt: skip
    return rows(pieces)
