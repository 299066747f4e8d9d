"""docs/simulate.md, `--what-if`: berth replays the daemon's queue "with the daemon's policy",
and "the daemon's own estimates (`berth queue --start`) call it" too. One queue, two answers
to "when does it start": `berth simulate --what-if` (a user's replay) and the daemon's own
`berth queue --start` estimates. With every job's time limit declared and no run time learned
yet, both rest on the same facts: each pending job's predicted start, and the GPUs of the
jobs that start at once, must be the same, under each policy a daemon can run."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from helpers import wait_until

from berth.client import Client

from .conftest import WORKLOAD


@pytest.mark.parametrize("live", [("fifo", 4), ("balanced", 4), ("priority", 4), ("sjf", 4)],
                         indirect=True)  # fmt: skip
def test_what_if_and_the_daemons_estimates_agree(
    live: tuple[Any, str, Any], request: pytest.FixtureRequest
) -> None:
    """It replayed with the client's config's policy (the default, `guarded`), not the
    daemon's `--policy`: under `fifo` and `balanced` its starts were up to an hour off."""
    env, sock, fake = live
    policy = request.node.callspec.params["live"][0]
    work = [sys.executable, WORKLOAD, "--seconds", "300"]

    def submit(gpus: int, limit: float, priority: int = 0) -> int:
        job = {"argv": work, "env": env, "cwd": str(fake.root), "gpus": gpus,
               "time_limit": limit, "priority": priority}  # fmt: skip
        with Client(sock) as c:
            return int(c.call("submit", job=job)["job_id"])

    running = [submit(1, 900.0), submit(1, 2400.0), submit(2, 1800.0)]  # (every GPU)
    wait_until(lambda: _states(sock, running) == {"RUNNING"}, timeout=30,
               message="the first jobs run")  # fmt: skip
    pending = [submit(2, 600.0), submit(1, 3600.0, priority=5), submit(4, 300.0),
               submit(1, 1200.0), submit(3, 900.0, priority=2)]  # fmt: skip
    what_if = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "simulate", "--what-if", "--json"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert what_if.returncode == 0, what_if.stderr
    answer = json.loads(what_if.stdout)
    assert answer["policy"] == policy  # (the daemon's, as the replay says)
    predicted = {p["id"]: p for p in answer["jobs"]}
    with Client(sock) as c:
        rows = {r["id"]: r for r in c.call("queue")["jobs"]}
    for job in pending:
        est = rows[job].get("start_estimate") or {}
        assert est.get("start") is not None, (job, est)
        assert predicted[job]["start"] == pytest.approx(est["start"], abs=1e-3), (
            f"job {job}: --what-if says {predicted[job]['start']}, the daemon {est['start']}"
        )  # fmt: skip


def _states(sock: str, ids: list[int]) -> set[str]:
    with Client(sock) as c:
        rows = {r["id"]: r["state"] for r in c.call("queue")["jobs"]}
    return {rows.get(i, "?") for i in ids}


def test_what_if_marks_guesses_and_adds_your_job(live: tuple[Any, str, Any]) -> None:
    """docs/simulate.md: jobs without a limit are assumed to run ``--assume`` (default 1 h)
    and a ``~`` marks the predictions that rest on that guess; ``-g 2 -t 4:00:00`` adds
    "new (your job)" to the table, and queues nothing."""
    env, sock, fake = live  # (2 GPUs)
    work = [sys.executable, WORKLOAD, "--seconds", "300"]
    with Client(sock) as c:
        endless = int(c.call("submit", job={"argv": work, "env": env, "cwd": str(fake.root),
                                            "gpus": 2})["job_id"])  # fmt: skip
    wait_until(lambda: _states(sock, [endless]) == {"RUNNING"}, timeout=30, message="it runs")
    with Client(sock) as c:
        behind = int(c.call("submit", job={"argv": work, "env": env, "cwd": str(fake.root),
                                           "gpus": 1, "time_limit": 600.0})["job_id"])  # fmt: skip
        started = c.call("show", job_id=endless)["job"]["attempts"][0]["start"]

    def what_if(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "berth.cli.main", "simulate", "--what-if", *args],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    out = what_if("--json", "--assume", "2h")
    assert out.returncode == 0, out.stderr
    (pred,) = json.loads(out.stdout)["jobs"]
    assert pred["id"] == behind and not pred["exact"]  # (rests on the guess)
    assert pred["start"] == pytest.approx(started + 7200, abs=1e-3)
    table = what_if("-g", "2", "-t", "4:00:00")
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line for line in table.stdout.splitlines()[1:] if line[:1] != "#"}
    assert set(rows) == {str(behind), "new"}, table.stdout
    start_in = rows[str(behind)].split()[4]
    assert start_in.startswith("~"), rows[str(behind)]  # (the default hour: a guess)
    assert "(your job)" in rows["new"] and rows["new"].split()[5].startswith("~"), rows["new"]
    with Client(sock) as c:
        assert len(c.call("queue")["jobs"]) == 2  # (nothing queued)
