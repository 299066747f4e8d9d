"""`berth report`'s arithmetic (berth.daemon.report.tally), pure: attempts clipped to the
window and cut at UTC midnights, shares weighed, waiting between attempts, grouping, idle
holders."""

from __future__ import annotations

import calendar
from typing import Any

import pytest

from berth.daemon.report import tally

D = 86400.0
T0 = float(calendar.timegm((2026, 11, 2, 0, 0, 0)))  # a Monday, UTC midnight
MODELS = {0: "H100", 1: "H100", 2: "A100"}


def _job(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"id": 1, "user": "alice", "project": "vision", "state": "COMPLETED",
                            "submit_time": T0, "attempts": [], "ended_at": None}  # fmt: skip
    return {**base, **kw}


def _att(start: float, end: float | None, gpus: list[int], share: float = 1.0) -> dict[str, Any]:
    return {"start": start, "end": end, "gpus": gpus, "share": share}


def test_an_attempt_across_midnight_is_cut_and_clipped_to_the_window() -> None:
    job = _job(attempts=[_att(T0 + D - 3600, T0 + D + 7200, [0, 1])], ended_at=T0 + D + 7200)
    pieces = tally.job_pieces(job, T0, T0 + 2 * D, T0 + 3 * D, MODELS)
    by_day = {p["day"]: p for p in pieces}
    assert by_day[T0]["gpu_seconds"] == 2 * 3600 and by_day[T0 + D]["gpu_seconds"] == 2 * 7200
    assert by_day[T0 + D]["jobs"] == 1 and by_day[T0]["jobs"] == 0  # counted on its end day
    assert by_day[T0]["queued_seconds"] == D - 3600  # submitted at T0, started an hour to midnight
    # A window that starts half-way through its attempt sees only what falls inside it.
    late = tally.job_pieces(job, T0 + D, T0 + D + 3600, T0 + 3 * D, MODELS)
    assert sum(p["gpu_seconds"] for p in late) == 2 * 3600
    assert sum(p["jobs"] for p in late) == 0  # it ended after the window


def test_shares_weigh_and_a_running_attempt_counts_until_now() -> None:
    job = _job(state="RUNNING", attempts=[_att(T0 + 100, None, [2], share=0.25)])
    pieces = tally.job_pieces(job, T0, T0 + D, T0 + 500, MODELS)
    assert [(p["model"], p["gpu_seconds"], p["jobs"]) for p in pieces] == [("A100", 100.0, 0)]


def test_waiting_counts_between_attempts_and_while_pending() -> None:
    job = _job(state="COMPLETED", ended_at=T0 + 100,
               attempts=[_att(T0 + 10, T0 + 20, [0]), _att(T0 + 50, T0 + 100, [0])])  # fmt: skip
    assert tally.waits(job, T0 + 1000) == [(T0, T0 + 10), (T0 + 20, T0 + 50)]
    pending = _job(state="PENDING")
    assert tally.waits(pending, T0 + 30) == [(T0, T0 + 30)]
    retried = _job(state="CANCELLED", ended_at=T0 + 90, attempts=[_att(T0 + 10, T0 + 20, [0])])
    assert tally.waits(retried, T0 + 1000) == [(T0, T0 + 10), (T0 + 20, T0 + 90)]  # (its backoff)
    cancelled = _job(state="CANCELLED", ended_at=T0 + 40)
    pieces = tally.job_pieces(cancelled, T0, T0 + D, T0 + 50, MODELS)
    assert [(p["queued_seconds"], p["jobs"], p["state"]) for p in pieces] == [
        (40.0, 1, "CANCELLED")
    ]


def test_grouping_by_user_and_week_and_the_totals() -> None:
    a = _job(attempts=[_att(T0, T0 + 3600, [0])], ended_at=T0 + 3600)
    b = _job(id=2, user="bob", state="FAILED", submit_time=T0 + 8 * D, attempts=[_att(T0 + 8 * D, T0 + 8 * D + 1800, [2, 0])],
             ended_at=T0 + 8 * D + 1800)  # fmt: skip
    pieces = [*tally.job_pieces(a, T0, T0 + 30 * D, T0 + 30 * D, MODELS),
              *tally.job_pieces(b, T0, T0 + 30 * D, T0 + 30 * D, MODELS)]  # fmt: skip
    rows = tally.group(pieces, ["user", "week"])
    assert [(r["user"], r["week"], r["gpu_hours"], r["states"]) for r in rows] == [
        ("alice", "2026-W45", 1.0, {"COMPLETED": 1}),
        ("bob", "2026-W46", 1.0, {"FAILED": 1}),
    ]
    by_model = tally.group(pieces, ["model"])
    assert [(r["model"], r["gpu_hours"]) for r in by_model] == [("A100 + H100", 1.0), ("H100", 1.0)]
    (total,) = tally.group(pieces, [])
    assert total["jobs"] == 2 and total["gpu_hours"] == 2.0 and total["states"] == {
        "COMPLETED": 1, "FAILED": 1}  # fmt: skip
    assert tally.group(pieces, ["month"])[0]["month"] == "2026-11"


def test_sampled_utilisation_is_spread_and_idle_holders_are_named() -> None:
    job = _job(attempts=[_att(T0, T0 + 3600, [0, 1])], ended_at=T0 + 3600)
    usage = {"sampled": 7200.0, "util": 7200.0 * 2, "mem": 7200.0 * 0.5}  # 2 %, half the memory
    pieces = tally.job_pieces(job, T0, T0 + D, T0 + D, MODELS, usage)
    (row,) = tally.group(pieces, ["user"])
    assert (row["util"], row["mem"], row["sampled_hours"]) == (2.0, 50.0, 2.0)
    held = {1: 7200.0}
    assert [r["id"] for r in tally.idle([job], {1: usage}, held)] == [1]
    busy = {"sampled": 7200.0, "util": 7200.0 * 80, "mem": 0.0}
    assert tally.idle([job], {1: busy}, held) == []
    barely = {"sampled": 600.0, "util": 0.0, "mem": 0.0}  # too little of it sampled to judge
    assert tally.idle([job], {1: barely}, held) == []


@pytest.mark.parametrize("by", [["user", "user"], ["users"], ["day", "tenant"]])
def test_bad_groupings_are_refused_with_their_name(by: list[str]) -> None:
    with pytest.raises(ValueError, match="--by"):
        tally.check_by(by)
