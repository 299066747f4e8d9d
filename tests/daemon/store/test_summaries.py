"""History that survives pruning (berth.daemon.store.summaries, issue 36.2): a pruned job's
figures land on the days they fell, added to what is there; a window counts a summarized day
it overlaps, the day it starts in only if it starts in that day's first half (claims: the
same by the hour); rows older than KEEP_DAYS go."""

from __future__ import annotations

import calendar
import json
from pathlib import Path
from typing import Any

from berth.daemon.report import tally
from berth.daemon.store import summaries
from berth.daemon.store.store import Store

D = 86400.0
T0 = float(calendar.timegm((2026, 11, 2, 0, 0, 0)))


def _insert(store: Store, job: dict[str, Any], ended: float) -> None:
    with store.tx() as db:
        db.execute(
            "INSERT INTO jobs(id, uid, user, state, submitted_at, ended_at, data, spec) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, '{}')",
            (job["id"], 1000, job["user"], job["state"], job["submit_time"], ended,
             json.dumps(job)),
        )  # fmt: skip


def test_pruned_jobs_are_summarized_on_their_days_and_windows_count_whole_days(
    tmp_path: Path,
) -> None:
    store = Store.open(str(tmp_path / "berth.db"))
    try:
        # 2 GPUs from an hour before midnight to two hours after: 2 h on day 0, 4 h on day 1.
        job = {"id": 1, "user": "ann", "project": "vision", "state": "COMPLETED",
               "submit_time": T0 + D - 3600,
               "attempts": [{"start": T0 + D - 3600, "end": T0 + D + 7200, "gpus": [0, 1],
                             "share": 1.0}]}  # fmt: skip
        _insert(store, job, T0 + D + 7200)
        _insert(store, {**job, "id": 2, "state": "FAILED"}, T0 + D + 7200)
        rows = summaries.summarize(store, [1, 2], {0: "H100", 1: "H100"})
        with store.tx() as db:
            db.executemany(summaries.ADD_SQL, rows)
            db.executemany(summaries.ADD_SQL, rows[:1])  # (a second purge adds to a day's row)
            db.execute("DELETE FROM jobs")
        got = summaries.read(store, T0, T0 + 3 * D)
        by_day = tally.group(got, ["day"])
        assert [(r["day"], r["gpu_hours"], r["jobs"]) for r in by_day] == [
            ("2026-11-02", 2 * 2 + 2, 0),  # (the first row twice: 2 more GPU-hours)
            ("2026-11-03", 2 * 4, 2),
        ]
        assert tally.group(got, [])[0]["states"] == {"COMPLETED": 1, "FAILED": 1}
        # A window from 10:00 of day 0 counts day 0; one from 14:00 does not.
        assert {p["day"] for p in summaries.read(store, T0 + 10 * 3600, T0 + 3 * D)} == {T0, T0 + D}
        assert {p["day"] for p in summaries.read(store, T0 + 14 * 3600, T0 + 3 * D)} == {T0 + D}
        assert summaries.read(store, T0 + 14 * 3600, T0 + D) == []  # (until: exclusive)
        # Claims by the hour: from 10:20 the 10:00 hour counts, from 10:40 it does not.
        with store.tx() as db:
            db.executemany(summaries.ADD_SQL, summaries.claims([("bob", 1.0, T0 + 10 * 3600)],
                                                               T0 + 12 * 3600))  # fmt: skip
        hours = lambda since: sorted(p["day"] for p in summaries.read(store, since, T0 + D)  # noqa: E731
                                     if p["kind"] == "claim")  # fmt: skip
        assert hours(T0 + 10 * 3600 + 1200) == [T0 + 10 * 3600, T0 + 11 * 3600]
        assert hours(T0 + 10 * 3600 + 2400) == [T0 + 11 * 3600]
        # Rows older than KEEP_DAYS go.
        with store.tx() as db:
            db.execute(summaries.PRUNE_SQL, (T0 + D,))
        assert {p["day"] for p in summaries.read(store, 0, T0 + 3 * D)} == {T0 + D}
    finally:
        store.close()
