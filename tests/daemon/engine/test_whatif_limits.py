"""docs/simulate.md ("the users' usage, shares and GPU limits are replayed too, so the order
between users is the one the daemon will follow"): two things the daemon counts when it
starts a job, and `berth simulate --what-if` must count too, or it predicts starts the daemon
then refuses:

- the GPUs a user holds with claims outside the queue (`berth run`, `berth.acquire()`) count
  against their ``max_gpus`` (docs/claims.md): the what-if read the users' limits alone;
- ``[daemon] max_job_time`` ends a job at the smaller of its limit and that cap: the what-if
  ran each job to its own limit (a job without one: ``--assume``).

Each is checked against the daemon's own estimates (`berth queue --start`), which follow its
passes (tests/sim/test_whatif_agrees.py). Needs root (to act as the users), as CI runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from helpers import wait_until
from test_system_mode import System
from userkit import A, AsUser, C

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


def _what_if(daemon: Any) -> dict[int, float | None]:
    out = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "simulate", "--what-if", "--json"],
        env=daemon.env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return {p["id"]: p["start"] for p in json.loads(out.stdout)["jobs"]}


def _estimates(daemon: Any, jobs: list[int]) -> dict[int, float | None]:
    rows = {r["id"]: r for r in daemon.call("queue")["jobs"]}
    return {j: (rows[j].get("start_estimate") or {}).get("start") for j in jobs}


def test_claims_outside_the_queue_count_against_max_gpus_as_the_daemon_counts(
    daemon: Any,
) -> None:  # fmt: skip
    """A (``max_gpus = 2``) holds GPU 0 with a `berth run` claim; C's 3-GPU job holds the
    others. When it ends only one of A's two 1-GPU jobs may start (GPU 0 and one more: two),
    the other once that one ends. The what-if started both at once."""
    from berth.claims.ledger import Ledger

    system = System(daemon)
    daemon.env["BERTH_CLAIMS_DIR"] = system.run  # (the daemon's claims: as /run/berth)
    with open(system.config) as f:
        text = f.read().replace("[claims]\n", f'[claims]\ndir = "{system.run}"\n')
    with open(system.config, "w") as f:
        f.write(text)
    system.start()
    assert system.berth(C, "admin", "limits", A, "--max-gpus", "2").returncode == 0
    uuids = daemon.fake.uuids
    kept: list[object] = []

    def hold() -> int:
        kept.append(Ledger(system.run).try_claim([uuids[0]], share=0.01, label="A's run"))
        assert all(kept)
        return len(kept)

    users = AsUser()
    try:
        users.start(A, hold, hold=True)  # (A's process lives on, holding its claim)
        wait_until(lambda: {u["user"]: u.get("gpus") for u in daemon.call("queue")["users"]}
                   .get(A) == 1.0, timeout=20, message="the daemon sees A's claim")  # fmt: skip
        long = system.submit(C, "-g", "3", "-t", "10", "--", "sleep", "600")
        wait_until(lambda: daemon.job(long)["state"] == "RUNNING", timeout=30, message="C runs")
        mine = [system.submit(A, "-g", "1", "-t", "5", "--", "sleep", "60") for _ in range(2)]
        what_if = _what_if(daemon)
        estimated = _estimates(daemon, mine)
        end = daemon.job(long)["attempts"][0]["start"] + 600.0  # (C's time limit)
        assert sorted(estimated.values()) == pytest.approx([end, end + 300.0], abs=1e-3)  # type: ignore[type-var]
        assert [what_if[j] for j in mine] == pytest.approx([estimated[j] for j in mine],
                                                           abs=1e-3), (what_if, estimated)  # fmt: skip
        daemon.call("cancel", job_ids=[long, *mine])
    finally:
        users.cleanup()


def test_the_daemons_max_job_time_ends_jobs_in_the_what_if_too(daemon: Any) -> None:
    """``[daemon] max_job_time = "10m"``: C's 4-GPU job names no limit and gets those 10
    minutes (docs/admin.md); A's job behind it starts then. The what-if assumed C's job ran
    ``--assume`` (an hour), as a job nothing stops."""
    system = System(daemon)
    with open(system.config) as f:
        text = f.read().replace("[daemon]\n", '[daemon]\nmax_job_time = "10m"\n')
    with open(system.config, "w") as f:
        f.write(text)
    system.start()
    long = system.submit(C, "-g", "4", "--", "sleep", "600")
    wait_until(lambda: daemon.job(long)["state"] == "RUNNING", timeout=30, message="C runs")
    mine = system.submit(A, "-g", "1", "-t", "5", "--", "sleep", "60")
    what_if = _what_if(daemon)
    estimated = _estimates(daemon, [mine])
    end = daemon.job(long)["attempts"][0]["start"] + 600.0  # (the daemon's cap)
    assert estimated[mine] == pytest.approx(end, abs=1e-3)
    assert what_if[mine] == pytest.approx(end, abs=1e-3), (what_if, estimated)
    daemon.call("cancel", job_ids=[long, mine])
