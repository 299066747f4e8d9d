"""`berth report` on a daemon that ran known jobs (issue 36.1, 36.2): its GPU-hours are those
computed by hand from the jobs' recorded attempts; a user sees their own rows and the totals,
an admin everyone's; after the jobs are pruned (keep_finished) their daily summaries give the
same totals; csv and table say the same."""

from __future__ import annotations

import csv
import io
import json
import os
import pwd
import subprocess
import sys
import time
from typing import Any

import pytest
from helpers import wait_until
from userkit import NOBODY, request_as


def _held(job: dict[str, Any]) -> float:
    """GPU-hours of a job's attempts, by hand: (end - start) x GPUs x share."""
    return (
        sum((a["end"] - a["start"]) * len(a["gpus"]) * a["share"] for a in job["attempts"]) / 3600
    )


def _waited(job: dict[str, Any]) -> float:
    return (job["attempts"][0]["start"] - job["submit_time"]) / 3600


def _report(daemon: Any, *args: str) -> dict[str, Any]:
    out = daemon.berth("report", *args, "--format", "json")
    assert out.returncode == 0, out.stderr
    reply: dict[str, Any] = json.loads(out.stdout)
    return reply


def _run_jobs(daemon: Any) -> list[dict[str, Any]]:
    ids = [
        daemon.submit("sleep", "0.4", gpus=1),
        daemon.submit("sleep", "0.3", gpus=2),
        daemon.submit("sh", "-c", "sleep 0.2; exit 3", gpus=1),
    ]
    daemon.wait_done(ids)
    return [daemon.job(i) for i in ids]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_report_adds_up_to_the_job_records_for_users_and_admins_and_after_pruning(daemon):
    daemon.start()
    os.chmod(daemon.sockdir, 0o755)
    os.chmod(daemon.socket, 0o666)
    mine = _run_jobs(daemon)
    spec = {"argv": ["sleep", "0.3"], "env": {"PATH": "/usr/bin:/bin"}, "cwd": "/",
            "stdout": "/dev/null", "stderr": "/dev/null", "gpus": 1}  # fmt: skip
    theirs = request_as(NOBODY, daemon.socket, "submit", job=spec)["ok"]["job_id"]
    daemon.wait_done([theirs])
    other = daemon.job(theirs)
    jobs = [*mine, other]
    me = mine[0]["user"]
    hours = sum(_held(j) for j in jobs)
    assert hours > 0

    admin = _report(daemon, "--since", "1d", "--by", "user")
    total = admin["totals"]
    assert total["gpu_hours"] == pytest.approx(hours, abs=1e-3)
    assert total["queued_hours"] == pytest.approx(sum(_waited(j) for j in jobs), abs=1e-3)
    assert total["jobs"] == 4 and total["states"] == {"COMPLETED": 3, "FAILED": 1}
    by_user = {r["user"]: r for r in admin["rows"]}
    assert set(by_user) == {me, other["user"]}
    assert by_user[me]["gpu_hours"] == pytest.approx(sum(_held(j) for j in mine), abs=1e-3)
    assert by_user[other["user"]]["gpu_hours"] == pytest.approx(_held(other), abs=1e-3)

    # A user sees their own rows, and everyone's totals.
    since = time.time() - 86400
    reply = request_as(NOBODY, daemon.socket, "report", since=since, by=["user"])["ok"]
    assert [r["user"] for r in reply["rows"]] == [other["user"]]
    assert reply["rows"][0]["gpu_hours"] == pytest.approx(_held(other), abs=1e-3)
    assert reply["totals"]["gpu_hours"] == pytest.approx(hours, abs=1e-3)
    assert reply["scope"] == other["user"]
    assert reply["idle"] == [] and all(r["user"] == other["user"] for r in reply["claims"])
    # Naming someone in the message changes nothing: the field is refused.
    for field in ({"uid": 0}, {"user": me}, {"all": True}):
        refused = request_as(NOBODY, daemon.socket, "report", since=since, **field)
        assert refused.get("code") == "BAD_REQUEST", (field, refused)

    # Pruned (keep_finished 1 s, purged as the daemon starts): the summaries say the same.
    last_end = max(j["attempts"][-1]["end"] for j in jobs)
    wait_until(lambda: time.time() > last_end + 1.5, timeout=10, message="1 s passes")
    daemon.stop()
    daemon.start("--keep-finished", "1s")
    wait_until(lambda: daemon.call("queue", all=True)["jobs"] == [], message="all purged")
    after = _report(daemon, "--since", "1d", "--by", "user")
    assert after["totals"]["gpu_hours"] == pytest.approx(hours, abs=1e-3)
    assert after["totals"]["states"] == {"COMPLETED": 3, "FAILED": 1}
    assert {r["user"]: r["gpu_hours"] for r in after["rows"]} == pytest.approx(
        {u: r["gpu_hours"] for u, r in by_user.items()}, abs=1e-3
    )

    # csv and table: the same figures, one row per user and the total.
    out = daemon.berth("report", "--since", "1d", "--by", "user", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert {r["user"]: float(r["gpu_hours"]) for r in rows if r["kind"] == "job"} == pytest.approx(
        {u: r["gpu_hours"] for u, r in by_user.items()}, abs=1e-3
    )
    (tot,) = [r for r in rows if r["kind"] == "total"]
    assert float(tot["gpu_hours"]) == pytest.approx(hours, abs=1e-3) and tot["jobs"] == "4"
    table = daemon.berth("report", "--since", "1d", "--by", "user").stdout
    assert "GPU-HOURS" in table and me in table and "FAILED:1" in table
    assert any(line.startswith("TOTAL") for line in table.splitlines())


def test_report_refuses_bad_windows_and_groupings_naming_them(daemon):
    daemon.start()
    for args, said in (
        (["--since", "yesterdayish"], "--since 'yesterdayish': not a time"),
        (["--by", "user,tenant"], "--by 'tenant': not a grouping"),
        (["--since", "1d", "--until", "2d"], "is not before --until"),
    ):
        out = daemon.berth("report", *args)
        assert out.returncode != 0 and said in out.stderr, (args, out.stderr)


def test_a_claim_outside_the_queue_is_reported_apart_while_held_and_after(daemon):
    """`berth run` beside the queue (no dashboard needed): its GPU-hours are reported under
    claims, not jobs, while it holds the GPU and, summarized by the hour, once it has gone."""
    daemon.start("--poll-interval", "0.2")
    gate = os.path.join(daemon.sockdir, "go")
    run = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "run", "-g", "1", "--", "sh", "-c",
         f"while [ ! -e {gate} ]; do sleep 0.05; done"],
        env=daemon.env,
    )  # fmt: skip
    try:

        def held() -> list[dict[str, Any]] | None:
            rows = _report(daemon, "--since", "1h")["claims"]
            return rows if rows and rows[0]["gpu_hours"] > 0 else None

        (row,) = wait_until(held, timeout=15, message="the claim in the report")
        assert row["user"] == pwd.getpwuid(os.getuid()).pw_name  # (the claim file's owner)
        began = time.time()
    finally:
        open(gate, "w").close()
        assert run.wait(timeout=15) == 0
    ended = time.time()

    last: list[float] = []

    def summarized() -> dict[str, Any] | None:
        """The claim's hours no longer grow: it has gone, and what it held is summarized."""
        reply = _report(daemon, "--since", "1h")
        hours = reply["claims"][0]["gpu_hours"] if reply["claims"] else 0.0
        last.append(hours)
        return reply if len(last) > 1 and last[-2] == hours > 0 else None

    reply = wait_until(summarized, timeout=15, interval=0.5, message="the ended claim summarized")
    hours = reply["claims"][0]["gpu_hours"] * 3600
    assert ended - began - 0.5 <= hours < ended - began + 20
    assert reply["totals"]["gpu_hours"] == 0 and reply["rows"] == []  # (no job: apart)
