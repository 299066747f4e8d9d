"""What the dashboard's ticks leave for `berth report` (berth.web.usage, issue 36.1): each
job's sampled utilisation and memory, added up across flushes in the store; outside use per
user and GPU model, a user's processes on one GPU once; and a report over them names the
idle holder."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until

from berth.daemon.report import tally
from berth.daemon.store import summaries
from berth.daemon.store.store import Store
from berth.web.usage import Usage

T = 1_800_000_000.0
GIB = 1024**3


def _gpus() -> list[dict[str, Any]]:
    job = {"kind": "job", "id": 7, "user": "ann", "share": 1.0, "mem": 8 * GIB}
    claim = {"kind": "claim", "user": "bob", "share": 0.5}
    outside = [{"kind": "outside", "user": "carol", "pid": p} for p in (10, 11)]
    base = {"name": "H100", "memory_used": 40 * GIB, "memory_total": 80 * GIB}
    return [
        {**base, "index": 0, "util": 2.0, "holders": [job]},
        {**base, "index": 1, "util": 50.0, "holders": [claim]},
        {**base, "index": 2, "util": 90.0, "holders": outside},
    ]


def test_ticks_become_job_usage_and_outside_hours_in_the_store(tmp_path: Path) -> None:
    u = Usage(tick=1.0)
    store = Store.open(str(tmp_path / "berth.db"))
    try:
        for flush in range(2):  # two minutes, flushed apart: the store adds them up
            for k in range(61):
                u.add(T + flush * 61 + k, _gpus())
            with store.tx() as db:
                for sql, rows in u.flush():
                    db.executemany(sql, rows)
            u._last = None  # (the next minute starts afresh)
        used = summaries.usage(store, [7])[7]
        assert used["sampled"] == 120 and used["util"] == 2 * 120 and used["peak_util"] == 2
        assert (
            abs(used["mem"] - 120 * 0.1) < 1e-9
        )  # its own processes' 8 of 80 GiB, not the GPU's 40
        pieces = summaries.read(store, 0, T + 2 * 86400)
        held = {(p["kind"], p["user"], p["model"]): p["gpu_seconds"] for p in pieces}
        assert held == {("outside", "carol", "H100"): 120}  # (claims: the engine's, not here)
        job = {"id": 7, "user": "ann", "project": "", "state": "COMPLETED", "submit_time": T,
               "attempts": [{"start": T, "end": T + 122, "gpus": [0], "share": 1.0}],
               "ended_at": T + 122}  # fmt: skip
        mine = tally.job_pieces(job, T, T + 200, T + 200, {0: "H100"}, used)
        (row,) = tally.group(mine, ["user"])
        assert row["util"] == 2.0 and row["mem"] == 10.0
        assert [r["id"] for r in tally.idle([job], {7: used}, {7: 122.0})] == [7]
    finally:
        store.close()


def test_the_sums_go_to_the_store_at_the_first_tick_of_each_period() -> None:
    """By default with the history's minute (T is a minute's start); `[daemon] usage_flush`
    sets another period."""
    minute = Usage(tick=1.0)
    ticks = (T - 1, T, T + 30, T + 59.9, T + 60, T + 61, T + 119, T + 120.5)
    assert [t for t in ticks if minute.due(t)] == [T, T + 60, T + 120.5]
    two = Usage(tick=0.5, every=2.0)
    assert [t for t in (T, T + 0.5, T + 1.9, T + 2.0, T + 3.5, T + 4.1) if two.due(t)] == [
        T + 2.0,
        T + 4.1,
    ]


def test_a_daemon_serving_the_page_reports_efficiency_idle_holders_and_outside_use(
    web: Any,
) -> None:
    """End to end: two jobs, one at 1 % and one at 80 % utilisation, and a process outside
    berth, sampled across a period's end (when the dashboard writes its sums: each minute,
    here every 2 s by `[daemon] usage_flush`): the report names the idle job only, with its
    utilisation, and reports the outside use apart."""
    config = web.daemon.fake.root / "config.toml"
    config.write_text('[daemon]\nusage_flush = "2s"\n')
    web.daemon.env["BERTH_CONFIG"] = str(config)
    web.start(gpus=3)
    d, fake = web.daemon, web.daemon.fake
    outside = fake.spawn_workload(visible="2", mem="2G", util=70)
    assert outside is not None
    idle = d.submit(*fake.workload_cmd("--util", "1"), name="notebook", gpus=1)
    busy = d.submit(*fake.workload_cmd("--util", "80"), name="train", gpus=1)
    wait_until(lambda: all(d.job(i)["state"] == "RUNNING" for i in (idle, busy)), timeout=15,
               message="both run")  # fmt: skip
    started = max(d.job(i)["attempts"][-1]["start"] for i in (idle, busy))
    period = (started // 2 + 1) * 2
    while period - started < 10:  # (sampled for at least 10 s before the period closes)
        period += 2
    wait_until(lambda: time.time() > period + 1.5, timeout=30, interval=0.1,
               message="a period's end passes")  # fmt: skip
    d.call("cancel", job_ids=[idle, busy])
    d.wait_done([idle, busy])
    report = json.loads(d.berth("report", "--since", "1h", "--format", "json").stdout)
    assert [(r["id"], r["name"]) for r in report["idle"]] == [(idle, "notebook")]
    assert report["idle"][0]["util"] == pytest.approx(1.0, abs=0.5)
    totals = report["totals"]
    assert totals["sampled_hours"] > 0 and 1.0 < totals["util"] < 80.0
    (out,) = report["outsides"]
    assert out["gpu_hours"] > 0
