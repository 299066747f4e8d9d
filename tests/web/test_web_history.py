"""The charts' history: minute rows made from ticks, kept in the store (bounded to a day) and
read back after a restart; GPU-hours integrated per user; series bounded in size."""

from __future__ import annotations

from pathlib import Path

from berth.daemon.store.store import Store
from berth.web.history import DAY, MAX_POINTS, History, Sample


def tick(t: float, util: float, users: dict[str, float], running: int = 1) -> Sample:
    return Sample(t, {0: util, 1: util / 2}, {0: 0.5, 1: 0.25}, running, 3, users)


def test_minutes_are_averaged_stored_pruned_and_read_back(tmp_path: Path) -> None:
    h = History(tick=1.0)
    start = 1_800_000_000.0  # a minute boundary
    rows = []
    for k in range(150):  # two and a half minutes, one tick a second
        row = h.add(tick(start + k, 40 if k < 60 else 80, {"ann": 2.0}))
        if row is not None:
            rows.append(row)
    assert [t for t, _ in rows] == [start, start + 60]  # each closed minute once
    first = Sample.from_row(*rows[0])
    assert first is not None and first.util[0] == 40 and first.users == {"ann": 2.0}
    assert round(h.gpu_seconds["ann"]) == 2 * 149  # held GPUs over time, since the start
    assert abs(h.gpu_hours(start + 150)["ann"] - 2 * 150 / 3600) < 2 * 2 / 3600
    store = Store.open(str(tmp_path / "berth.db"))
    try:
        with store.tx() as db:
            db.executemany(Store.SAMPLE_SQL, [(start - 2 * DAY, rows[0][1]), *rows])
            db.execute(Store.PRUNE_SAMPLES_SQL, (start + 150 - DAY,))
        kept = store.samples_since(start + 150 - DAY)
        assert [t for t, _ in kept] == [start, start + 60]  # the old row pruned
        with store.tx() as db:
            db.execute(Store.SAMPLE_SQL, (start + 120, "not json"))
        again = History(tick=1.0, rows=store.samples_since(0))  # a damaged row is skipped
        series = again.series(start + 150)
        assert [p[0] for p in series["points"]] == [start, start + 60]
        assert series["points"][1][1] == 60.0  # mean of 80 and 40
    finally:
        store.close()


def test_series_are_bounded_and_hours_count_the_last_day_only() -> None:
    h = History(tick=0.5)
    now = 1_800_000_000.0
    for k in range(int(DAY / 60)):  # a stored day of minutes, a user in its first half
        h.minutes.append(tick(now - DAY + 60 * k, 50, {"bo": 1.0} if k < 720 else {}))
    for k in range(7200):  # and an hour of ticks
        h.add(tick(now + 0.5 * k, 90, {"cy": 0.5}))
    end = now + 3600
    pts = h.series(end)["points"]
    assert 0 < len(pts) <= MAX_POINTS and pts[0][0] < pts[-1][0]
    assert pts[-1][1] == 67.5  # (90 + 45) / 2
    hours = h.gpu_hours(end)
    assert 11 < hours["bo"] < 12  # minutes older than a day fell out
    assert 0.45 < hours["cy"] < 0.55
