"""docs/simulate.md ("on a daemon with fair share the users' usage, shares and GPU limits are
replayed too, so the order between users is the one the daemon will follow") and
docs/scheduling.md (with projects, fair share compares projects first, then users): on the
system daemon with two projects, user C's project has used a lot, user B's project a
little, user A (C's project) nothing. A's and B's 4-GPU jobs wait behind C's. The daemon
starts B's first (B's project is behind); `berth simulate --what-if` and the daemon's own
estimates (`berth queue --start`) must say so too. They compared users only (A has used
less than B), and predicted A's first: the opposite of what the daemon then did.

Needs root (to act as the users), as CI runs the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest
from helpers import wait_until
from test_system_mode import System
from userkit import A, B, C

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


def test_predictions_order_projects_first_as_the_daemon_does(daemon: Any) -> None:
    system = System(daemon)
    with open(system.config, "a") as f:
        f.write(f'[scheduling]\nfairshare_half_life = "inf"\n'
                f'[projects.p1]\nusers = ["{A}", "{C}"]\n[projects.p2]\nusers = ["{B}"]\n')  # fmt: skip
    system.start()
    warm = system.submit(B, "-g", "1", "-t", "1", "-A", "p2", "--", "sleep", "1")  # (B: a little)
    daemon.wait_done([warm])
    ran = daemon.job(warm)["attempts"][0]
    little = ran["end"] - ran["start"]  # (B's project's GPU-seconds)
    long = system.submit(C, "-g", "4", "-t", "10", "-A", "p1", "--", "sleep", "600")
    wait_until(lambda: daemon.job(long)["state"] == "RUNNING", timeout=30, message="C runs")
    began_c = daemon.job(long)["attempts"][0]["start"]
    # (C's project well past B's: 4 GPUs for longer than B's one ran, whatever the load)
    wait_until(lambda: time.time() - began_c > little + 0.2, timeout=30, message="C ran")
    first = system.submit(A, "-g", "4", "-t", "5", "-A", "p1", "--", "sleep", "1")
    second = system.submit(B, "-g", "4", "-t", "5", "-A", "p2", "--", "sleep", "1")

    out = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "simulate", "--what-if", "--json"],
        env=daemon.env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    what_if = {p["id"]: p["start"] for p in json.loads(out.stdout)["jobs"]}
    rows = {r["id"]: r for r in daemon.call("queue")["jobs"]}
    estimated = {j: (rows[j].get("start_estimate") or {}).get("start") for j in (first, second)}
    assert None not in estimated.values(), estimated

    assert daemon.call("cancel", job_ids=[long])  # C's job ends: the daemon chooses
    daemon.wait_done([first, second], timeout=60)
    began = {j: daemon.job(j)["attempts"][0]["start"] for j in (first, second)}
    assert began[second] < began[first], began  # B's project goes first (the daemon's order)
    assert what_if[second] < what_if[first], f"--what-if predicted A's first: {what_if}"
    assert estimated[second] < estimated[first], f"queue --start predicted A's first: {estimated}"


def test_predictions_keep_a_projects_gpu_quota_as_the_daemon_does(daemon: Any) -> None:
    """docs/admin.md, Projects: a job that would take its project above ``max_gpus`` waits
    (``ProjectGpuLimit``). Three 1-GPU jobs of project p1 (``max_gpus = 2``) wait behind C's
    job on all 4 GPUs: when it ends two of them start, the third after one of those. The
    daemon's estimates say so; `simulate --what-if` read only the users' limits and started
    all three at once."""
    system = System(daemon)
    with open(system.config, "a") as f:
        f.write(f'[projects.p1]\nmax_gpus = 2\nusers = ["{A}"]\n')
    system.start()
    long = system.submit(C, "-g", "4", "-t", "10", "--", "sleep", "600")
    wait_until(lambda: daemon.job(long)["state"] == "RUNNING", timeout=30, message="C runs")
    mine = [system.submit(A, "-g", "1", "-t", "5", "-A", "p1", "--", "sleep", "60")
            for _ in range(3)]  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "simulate", "--what-if", "--json"],
        env=daemon.env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    what_if = {p["id"]: p["start"] for p in json.loads(out.stdout)["jobs"]}
    rows = {r["id"]: r for r in daemon.call("queue")["jobs"]}
    estimated = {j: (rows[j].get("start_estimate") or {}).get("start") for j in mine}
    end = daemon.job(long)["attempts"][0]["start"] + 600.0  # (C's time limit)
    assert sorted(estimated.values()) == pytest.approx([end, end, end + 300.0], abs=1e-3)
    assert [what_if[j] for j in mine] == pytest.approx([estimated[j] for j in mine], abs=1e-3), (
        what_if, estimated)  # fmt: skip
    daemon.call("cancel", job_ids=[long, *mine])


def test_jobs_of_no_project_count_together_as_one_more_project(daemon: Any) -> None:
    """docs/scheduling.md, "Jobs that name no project count together as one more project"
    whose usage is that of all its jobs (running ones so far): C's 4-GPU job of no project
    has run longer than A's little one of p1 when it ends, so A's job (p1) goes before B's
    (no project), and the what-if and `queue --start` say so. The daemon kept no usage for
    jobs of no project once they ended (only running ones counted), nor did the what-if:
    both started B's first, as if C had used nothing."""
    system = System(daemon)
    with open(system.config, "a") as f:
        f.write(f'[scheduling]\nfairshare_half_life = "inf"\n[projects.p1]\nusers = ["{A}"]\n')
    system.start()
    warm = system.submit(A, "-g", "1", "-t", "1", "-A", "p1", "--", "sleep", "1")  # (a little)
    daemon.wait_done([warm])
    ran = daemon.job(warm)["attempts"][0]
    little = ran["end"] - ran["start"]  # (p1's GPU-seconds)
    long = system.submit(C, "-g", "4", "-t", "10", "--", "sleep", "600")  # (no project)
    wait_until(lambda: daemon.job(long)["state"] == "RUNNING", timeout=30, message="C runs")
    began_c = daemon.job(long)["attempts"][0]["start"]
    wait_until(lambda: time.time() - began_c > little + 0.2, timeout=30, message="C ran")
    first = system.submit(B, "-g", "4", "-t", "5", "--", "sleep", "1")  # (no project)
    second = system.submit(A, "-g", "4", "-t", "5", "-A", "p1", "--", "sleep", "1")

    out = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "simulate", "--what-if", "--json"],
        env=daemon.env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    what_if = {p["id"]: p["start"] for p in json.loads(out.stdout)["jobs"]}
    rows = {r["id"]: r for r in daemon.call("queue")["jobs"]}
    estimated = {j: (rows[j].get("start_estimate") or {}).get("start") for j in (first, second)}
    assert None not in estimated.values(), estimated

    assert daemon.call("cancel", job_ids=[long])  # C's job ends: the daemon chooses
    daemon.wait_done([first, second], timeout=60)
    began = {j: daemon.job(j)["attempts"][0]["start"] for j in (first, second)}
    assert began[second] < began[first], began  # p1 goes first: "" used more (C's job)
    assert what_if[second] < what_if[first], f"--what-if predicted B's first: {what_if}"
    assert estimated[second] < estimated[first], f"queue --start predicted B's first: {estimated}"
