"""`berth submit --begin` (issue 24.2): the job waits as PENDING (BeginTime) and starts at its
begin time, woken then by the daemon's timer (no polling); sbatch's forms are read."""

from __future__ import annotations

import json
import time

import pytest
from helpers import wait_until

from berth.errors import UsageError
from berth.units import parse_begin


def test_begin_forms() -> None:
    now = time.mktime((2026, 11, 26, 12, 0, 0, 0, 0, -1))
    assert parse_begin("now+2h", now) == now + 7200
    assert parse_begin("now+90", now) == now + 90  # (a bare number after now+: seconds)
    assert parse_begin("now+30minutes", now) == now + 1800
    assert parse_begin("14:00", now) == now + 7200  # today
    assert parse_begin("11:00", now) == now + 23 * 3600  # passed: tomorrow
    assert parse_begin("2026-12-01T09:00", now) == time.mktime((2026, 12, 1, 9, 0, 0, 0, 0, -1))
    with pytest.raises(UsageError, match="invalid --begin 'soonish'"):
        parse_begin("soonish", now)


def test_a_job_waits_for_its_begin_time_then_starts(daemon):
    daemon.start("--poll-interval", "60")  # (no poll wakes it: the begin time's timer does)
    out = daemon.berth("submit", "--parsable", "--begin", "now+2", "--", "true")
    assert out.returncode == 0, out.stderr
    job_id = int(out.stdout)
    row = next(r for r in daemon.call("queue")["jobs"] if r["id"] == job_id)
    assert row["state"] == "PENDING" and row["reason"] == "BeginTime"
    assert "its begin time (--begin)" in row["reason_detail"]
    shown = json.loads(daemon.berth("show", "--json", str(job_id)).stdout)
    assert shown["not_before"] is not None
    done = daemon.wait_done([job_id], timeout=20)[job_id]
    assert done["state"] == "COMPLETED"
    started = daemon.job(job_id)["attempts"][0]["start"]
    assert started >= shown["not_before"] - 0.01


def test_begin_survives_a_restart(daemon):
    daemon.start()
    out = daemon.berth("submit", "--parsable", "--begin", "now+1h", "--", "true")
    job_id = int(out.stdout)
    before = daemon.job(job_id)["not_before"]
    daemon.stop()
    daemon.start()
    after = daemon.job(job_id)
    assert after["state"] == "PENDING" and after["not_before"] == before
    wait_until(lambda: daemon.call("queue")["jobs"][0].get("reason") == "BeginTime",
               timeout=10, message="BeginTime after the restart")  # fmt: skip


def test_release_job_at_a_time(daemon):
    """`berth release-job --at TIME`: a held job released, to start only from TIME."""
    daemon.start("--poll-interval", "60")
    held = daemon.submit("true", hold=True)
    out = daemon.berth("release-job", "--at", "now+2", str(held))
    assert out.returncode == 0, out.stderr
    row = next(r for r in daemon.call("queue")["jobs"] if r["id"] == held)
    assert row["reason"] == "BeginTime"
    assert daemon.wait_done([held], timeout=20)[held]["state"] == "COMPLETED"
    bad = daemon.berth("hold", "--at", "now+2", str(held))
    assert bad.returncode == 2 and "--at is for `berth release-job`" in bad.stderr
