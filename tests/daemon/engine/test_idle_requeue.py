"""Idle holders (issue 25.3): `idle = "requeue"` sends an idle job back to the end of the queue
after the notice and its grace (its attempt PREEMPTED with the reason, as a time limit does
with --requeue), and a restarted daemon goes on where the last one was: the same idle
``since``, no second notice, the grace not started over
(berth/daemon/engine/idle_holders.py)."""

from __future__ import annotations

import json
import os
from typing import Any

from helpers import wait_until


def _configure(daemon: Any, text: str) -> None:
    path = os.path.join(daemon.fake.root, "config.toml")
    with open(path, "w") as f:
        f.write(text)
    daemon.env["BERTH_CONFIG"] = path


def _idle(daemon: Any, job: int) -> dict[str, Any] | None:
    view = daemon.call("status")["enforce"]
    return next((i for i in view["idle"] if i["holder"] == f"job {job}"), None)


def _log(daemon: Any) -> list[dict[str, Any]]:
    out = daemon.berth("admin", "log", "--json")
    assert out.returncode == 0, out.stderr
    entries: list[dict[str, Any]] = json.loads(out.stdout)["entries"]
    return entries


def test_an_idle_job_is_requeued_not_cancelled(daemon):
    _configure(daemon, '[enforce]\nidle = "requeue"\nidle_after = 1\nidle_grace = 1\n')
    daemon.fake.setup(n=1)
    daemon.start("--poll-interval", "0.2", gpus=None)
    job = daemon.submit(*daemon.workload("--mem", "1G", "--util", "0"), gpu_ids=[0])

    def requeued() -> list[dict[str, Any]] | None:
        attempts: list[dict[str, Any]] = daemon.job(job)["attempts"]
        return attempts if attempts and attempts[0].get("outcome") == "PREEMPTED" else None

    attempts = wait_until(requeued, timeout=20, message="the idle job is requeued")
    assert attempts[0]["reason"].startswith("idle for"), attempts[0]
    assert daemon.job(job)["state"] in ("PENDING", "RUNNING")  # back in the queue, not ended
    log = _log(daemon)
    assert [(e["action"], e["holder"]) for e in log[:2]] == [
        ("notify", f"job {job}"),
        ("requeue", f"job {job}"),
    ]
    assert log[1]["result"] == "requeuing" and log[1]["reason"].startswith("idle for")
    wait_until(lambda: len(daemon.job(job)["attempts"]) >= 2, timeout=10, message="runs again")
    daemon.call("cancel", job_ids=[job])
    assert daemon.wait_done([job])[job]["state"] == "CANCELLED"


def test_a_restarted_daemon_keeps_since_and_the_notice(daemon):
    _configure(daemon, '[enforce]\nidle = "release"\nidle_after = 1\nidle_grace = "1h"\n')
    daemon.fake.setup(n=1)
    daemon.start("--poll-interval", "0.2", gpus=None)
    job = daemon.submit(*daemon.workload("--mem", "1G", "--util", "0"), gpu_ids=[0])
    wait_until(lambda: [e["action"] for e in _log(daemon)] == ["notify"], timeout=10)
    since = _idle(daemon, job)["since"]
    daemon.stop()  # (its job runs on under its supervisor)
    daemon.start("--poll-interval", "0.2", gpus=None)
    flagged = wait_until(lambda: _idle(daemon, job), timeout=10, message="flagged again")
    assert flagged["since"] == since  # not the restart, not the job's start
    later = flagged["idle_seconds"] + 1.0  # (polls that acted on it went by)
    wait_until(lambda: _idle(daemon, job)["idle_seconds"] > later, timeout=10)
    assert [e["action"] for e in _log(daemon)] == ["notify"]  # told once, not again
