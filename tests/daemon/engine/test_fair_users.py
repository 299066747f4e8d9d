"""Fairness on the system daemon (issue 11.3), end to end through the real CLI and socket as
test users: two users flooding the queue get GPU-hours within 10% of each other; a 4-GPU job
behind a stream of 1-GPU jobs starts within the stated bound; per-user limits (reasons in
plain words, refusals at submit, set by admins only, kept across restarts); drain/undrain;
each user's usage and share under `berth queue`.

Needs root (to create the users and run as them), as CI runs the suite.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import pytest
from helpers import wait_until
from test_system_mode import System
from userkit import ADMINS, A, AsUser, B, C, call_as

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


@pytest.fixture
def system(daemon: Any) -> System:
    return System(daemon)


def _config(system: System, text: str) -> None:
    with open(system.config, "a") as f:
        f.write(text)


def submitter(sock: str, n: int, argv: list[str], **job: Any) -> Callable[[], list[int]]:
    """A function submitting ``n`` jobs over one connection (run as a user by call_as)."""

    def go() -> list[int]:
        from berth.client import Client

        spec = {"argv": argv, "env": {"PATH": "/usr/bin:/bin"}, "cwd": "/", **job}
        with Client(sock) as c:
            return [int(c.call("submit", job=spec)["job_id"]) for _ in range(n)]

    return go


def _runs(system: System, ids: list[int]) -> list[tuple[float, float, float]]:
    """(gpus, start, end) of each job's attempt."""
    out = []
    for i in ids:
        job = system.rig.job(i)
        a = job["attempts"][-1]
        out.append((float(job["request"]["gpus"]), float(a["start"]), float(a["end"])))
    return out


def test_two_users_flooding_get_gpu_hours_within_10_percent(system: System) -> None:
    """A floods the 4 GPUs first, B right after; over the busy period (until either has no
    job left to start) their GPU-seconds are within 10%. (Without fair share, A's jobs, all
    older, would go first: B would get nothing until A's queue ran dry.)"""
    system.start()
    a = call_as(A, submitter(system.sock, 50, ["sleep", "0.25"]))
    b = call_as(B, submitter(system.sock, 50, ["sleep", "0.25"]))
    assert isinstance(a, list) and isinstance(b, list), (a, b)
    done = system.rig.wait_done(a + b, timeout=90)
    assert {r["state"] for r in done.values()} == {"COMPLETED"}
    runs = {A: _runs(system, a), B: _runs(system, b)}
    busy = min(max(s for _, s, _ in r) for r in runs.values())

    def used(user: str) -> float:
        return sum(g * (min(e, busy) - s) for g, s, e in runs[user] if s < busy)

    ua, ub = used(A), used(B)
    assert abs(ua - ub) / max(ua, ub) <= 0.10, (ua, ub)
    # the usage is the daemon's too: B sees both users' decayed usage under the queue
    users = json.loads(system.berth(B, "queue", "--json").stdout)["users"]
    usage = {u["user"]: u["usage_gpu_hours"] * 3600 for u in users}
    total = {u: sum(g * (e - s) for g, s, e in r) for u, r in runs.items()}
    for user in (A, B):
        assert usage[user] == pytest.approx(total[user], rel=0.01)


def test_a_4_gpu_job_behind_a_stream_of_1_gpu_jobs_starts_within_the_limit(system: System) -> None:
    """B keeps the 4 GPUs busy with 60 jobs of 0.5 s (limit L = 2 s). A's 4-GPU job is first
    in line at once (A has used less) and reserves the GPUs; B's jobs cannot backfill there
    (they would not end before the reservation), so it starts within L of its submit (the
    bound; here + 1 s for the daemon). Without fair share it would wait for B's queue: ~7 s."""
    system.start()
    b = call_as(B, submitter(system.sock, 60, ["sleep", "0.5"], time_limit=2.0))
    assert isinstance(b, list), b
    wait_until(
        lambda: sum(r["state"] == "RUNNING" for r in system.rig.call("queue")["jobs"]) == 4,
        timeout=15, message="B's jobs hold every GPU",
    )  # fmt: skip
    big = call_as(A, submitter(system.sock, 1, ["true"], gpus=4, time_limit=2.0))[0]
    done = system.rig.wait_done([big], timeout=60)
    assert done[big]["state"] == "COMPLETED"
    job = system.rig.job(big)
    waited = job["attempts"][0]["start"] - job["submit_time"]
    assert waited <= 2.0 + 1.0, waited
    pending_b = [r for r in system.rig.call("queue")["jobs"] if r["state"] == "PENDING"]
    assert pending_b  # (the stream was still queued when it started)


def test_limits_reasons_refusals_and_who_may_set_them(system: System) -> None:
    _config(system, "[limits]\nmax_jobs = 3\n")
    system.start()
    # everyone may read; only admins may set
    shown = system.berth(B, "admin", "limits")
    assert shown.returncode == 0 and "(default)" in shown.stdout and " 3 " in shown.stdout
    refused = system.berth(B, "admin", "limits", A, "--max-gpus", "1")
    assert refused.returncode == 4
    assert f"{B} may not change {A}'s limits: only root, group '{ADMINS}' may" in refused.stderr
    ok = system.berth(C, "admin", "limits", A, "--max-gpus", "1", "--max-time", "10m")
    assert ok.returncode == 0, ok.stderr
    assert A in ok.stdout and "1*" in ok.stdout and "10:00*" in ok.stdout
    # max_gpus: the second job waits, saying why in plain words
    first = system.submit(A, "--", "sleep", "60")
    second = system.submit(A, "-J", "second", "--", "sleep", "60")
    wait_until(lambda: system.rig.job(first)["state"] == "RUNNING", timeout=15)
    line = next(x for x in system.berth(B, "queue").stdout.splitlines() if " second " in x)
    assert "(UserGpuLimit)" in line
    assert system.rig.job(second)["reason"] == (
        f"UserGpuLimit: {A} holds 1 of 1 GPUs allowed at once"
    )
    other = system.submit(B, "--", "true")  # B is not held behind A
    assert system.rig.wait_done([other])[other]["state"] == "COMPLETED"
    # max_time: a job without -t gets it; a longer -t is refused
    assert system.rig.job(first)["time_limit"] == 600.0
    long = system.berth(A, "submit", "-t", "1:00:00", "--", "true")
    assert long.returncode != 0 and f"-t 1:00:00 is more than {A} may ask" in long.stderr
    # max_jobs (the config's default, 3): the fourth is refused, nothing is stored
    system.submit(A, "--hold", "--", "true")
    fourth = system.berth(A, "submit", "--", "true")
    assert fourth.returncode != 0
    assert f"{A} has 3 jobs queued or running; the most allowed is 3" in fourth.stderr
    # -g above max_gpus can never start: refused
    wide = system.berth(A, "submit", "-g", "2", "--", "true")
    assert "may hold at most 1 GPUs at once" in wide.stderr
    # limits outlive the daemon
    system.rig.stop()
    system.start()
    again = json.loads(system.berth(A, "admin", "limits", A, "--json").stdout)
    assert again["users"][A]["in_force"]["max_gpus"] == 1.0
    assert again["users"][A]["set"]["max_time"] == 600.0
    back = system.berth(C, "admin", "limits", A, "--max-gpus", "default")
    assert back.returncode == 0
    wait_until(lambda: system.rig.job(second)["state"] == "RUNNING", timeout=15)


def test_bad_limit_values_are_refused_and_change_nothing(system: System) -> None:
    system.start()
    for args, words in (
        (("--max-gpus", "0"), "--max-gpus '0': must be positive"),
        (("--max-jobs", "2.5"), "whole number"),
        (("--max-time", "soon"), "invalid --max-time 'soon'"),
        (("--shares", "none"), "give a number or default"),
    ):
        out = system.berth(C, "admin", "limits", A, *args)
        assert out.returncode == 2 and words in out.stderr, (args, out.stderr)
    nobody = system.berth(C, "admin", "limits", "no-such-user-x", "--max-gpus", "1")
    assert "no user 'no-such-user-x' on this machine" in nobody.stderr
    raw = system.call(C, "limits", user=A, set={"max_gpus": -3})
    assert raw["code"] == "BAD_REQUEST" and "max_gpus = -3" in raw["message"]
    assert json.loads(system.berth(A, "admin", "limits", "--json").stdout)["users"] == {}


def test_drain_stops_new_starts_says_who_and_why_and_undrain_resumes(system: System) -> None:
    system.start()
    running = system.submit(A, "--", "sleep", "60")
    wait_until(lambda: system.rig.job(running)["state"] == "RUNNING", timeout=15)
    refused = system.berth(B, "admin", "drain")
    assert refused.returncode == 4 and "may not drain GPUs" in refused.stderr
    drained = system.berth(C, "admin", "drain", "--reason", "driver upgrade")
    assert drained.returncode == 0, drained.stderr
    assert f"GPU 0 drained by {C}: driver upgrade" in drained.stdout
    waiting = system.submit(B, "--", "true")
    reason = wait_until(lambda: system.rig.job(waiting)["reason"], timeout=10)
    assert reason.startswith("GpuPaused: GPU 0,1,2,3 paused; needs 1 GPU; ")
    assert reason.endswith(f"; drained by {C}: driver upgrade")
    assert system.rig.job(running)["state"] == "RUNNING"  # running jobs go on
    assert system.rig.job(waiting)["state"] == "PENDING"
    system.rig.stop()  # who and why outlive the daemon
    system.start()
    assert system.rig.job(waiting)["reason"] == reason
    again = system.berth(C, "admin", "undrain", "--all")
    assert again.returncode == 0 and "drained GPUs: none" in again.stdout
    assert system.rig.wait_done([waiting])[waiting]["state"] == "COMPLETED"
    # `berth pause` is the same thing without a reason; resuming forgets who did it
    assert system.berth(C, "pause", "0-3").returncode == 0
    later = system.submit(B, "--", "true")
    late = wait_until(lambda: system.rig.job(later)["reason"], timeout=10)
    assert late.endswith(f"; drained by {C}"), late
    assert system.berth(C, "resume", "--all").returncode == 0
    assert system.rig.wait_done([later])[later]["state"] == "COMPLETED"


def test_queue_shows_each_users_usage_and_share(system: System) -> None:
    system.start()
    a = call_as(A, submitter(system.sock, 2, ["sleep", "0.3"]))
    system.rig.wait_done(a)
    held = system.submit(B, "--hold", "--", "true")
    mine = system.submit(A, "--hold", "--", "true")
    out = system.berth(B, "queue")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    head = next(k for k, x in enumerate(lines) if x.startswith("USER "))
    assert "USAGE(GPU-h)" in lines[head] and "FAIRSHARE" in lines[head]
    rows = {x.split()[0]: x.split() for x in lines[head + 1 : head + 3]}
    assert set(rows) == {A, B}
    assert rows[B][5] == "0%" and rows[B][6] == "1.00"  # B has used nothing
    assert rows[A][5] == "100%" and float(rows[A][6]) < 0.5
    assert "usage halves every 7-00:00:00" in out.stdout
    only = system.berth(A, "queue", "--users", "--noheader").stdout.splitlines()
    assert [x.split()[0] for x in only] == [B, A]  # the order they go in: B first
    assert held and mine


def test_queue_start_predicts_the_fair_share_order(system: System) -> None:
    """`berth queue --start` (what-if) replays the users' usage: B has used a lot (a usage
    row written before the daemon starts), so A's job, submitted after B's, is predicted to
    start first, and does. (Without fair share in the prediction: B's, by submit order.)"""
    from berth.daemon.store.store import Store, open_store

    store = open_store(system.state)
    with store.tx():
        store.db.execute(Store.USAGE_SQL, (B, 3600.0 * 100, time.time()))
    store.close()
    system.start()
    hog = system.submit(A, "-g", "4", "--time-limit", "30", "--", "sleep", "2")
    wait_until(lambda: system.rig.job(hog)["state"] == "RUNNING", timeout=15)
    first = system.submit(B, "-g", "4", "--time-limit", "30", "--", "true")  # (one at a time)
    second = system.submit(A, "-g", "4", "--time-limit", "30", "--", "true")
    out = system.rig.berth("queue", "--start", "--json")  # (the same for whoever asks)
    assert out.returncode == 0, out.stderr
    start = {p["id"]: p["start"] for p in json.loads(out.stdout)["jobs"]}
    assert start[second] < start[first]
    users = json.loads(system.berth(B, "queue", "--json").stdout)["users"]
    assert [u["user"] for u in users] == [A, B] and users[1]["usage_gpu_hours"] > 99
    done = system.rig.wait_done([first, second], timeout=30)
    began = {j: system.rig.job(j)["attempts"][0]["start"] for j in done}
    assert began[second] < began[first]


def test_one_percent_shares_on_every_gpu_block_no_more_than_the_users_limit(
    system: System,
) -> None:
    """Issue 41.3 (hostile): with max_gpus = 1, A's 0.01 jobs, one on each GPU, kept every
    exclusive job of everyone waiting while A was charged 0.04 GPU. Each GPU A holds part of
    counts whole: one of A's jobs runs, the others wait for A's limit, B's exclusive job runs
    beside them, and A's line under `berth queue` shows the one GPU A holds."""
    _config(system, "[limits]\nmax_gpus = 1\n")
    system.start()
    tiny = [system.submit(A, "-g", "0.01", "--gpu-ids", str(k), "--", "sleep", "600")
            for k in range(4)]  # fmt: skip
    wait_until(lambda: any(system.rig.job(j)["state"] == "RUNNING" for j in tiny), timeout=15)
    exclusive = system.submit(B, "--", "true")
    assert system.rig.wait_done([exclusive])[exclusive]["state"] == "COMPLETED"
    rows = [system.rig.job(j) for j in tiny]
    assert sum(r["state"] == "RUNNING" for r in rows) == 1
    for r in rows:
        if r["state"] != "RUNNING":
            assert r["reason"].startswith(f"UserGpuLimit: {A} holds 1 of 1 GPUs"), r["reason"]
    users = {u["user"]: u for u in system.rig.call("queue")["users"]}
    assert users[A]["gpus"] == 1.0 and users[A]["max_gpus"] == 1.0


def test_claims_of_a_share_outside_the_queue_count_whole(system: System) -> None:
    """A's `berth run` of 0.01 on GPUs 0-2 (daemonless: the daemon cannot stop it) holds
    three GPUs against A's limit: A's queue jobs get no further GPU (before issue 41.3 they
    counted 0.03, and A's exclusive job took a fourth), and `berth queue` shows the three."""
    from berth.claims.ledger import Ledger

    system.rig.env["BERTH_CLAIMS_DIR"] = system.run  # (the daemon's claims: as /run/berth)
    with open(system.config) as f:
        text = f.read().replace("[claims]\n", f'[claims]\ndir = "{system.run}"\n')
    with open(system.config, "w") as f:
        f.write(text + "[limits]\nmax_gpus = 2\n")
    system.start()
    uuids = system.rig.fake.uuids

    kept: list[object] = []

    def hold() -> int:
        ledger = Ledger(system.run)
        kept.extend(ledger.try_claim([uuids[k]], share=0.01, label="A's berth run")
                    for k in range(3))  # fmt: skip
        assert all(kept)
        return len(kept)

    users_run = AsUser()
    try:
        users_run.start(A, hold, hold=True)  # (A's process lives on, holding its claims)
        job = system.submit(A, "--", "true")
        wait_until(
            lambda: (system.rig.job(job).get("reason") or "").startswith(
                f"UserGpuLimit: {A} holds 3 of 2 GPUs"),
            timeout=15, message="A's job waits for A's limit",
        )  # fmt: skip
        users = {u["user"]: u for u in system.rig.call("queue")["users"]}
        assert users[A]["gpus"] == 3.0
    finally:
        users_run.cleanup()
