"""Admin reservations against another user's jobs on the system daemon (docs/scheduling.md,
"Reservations"; docs/admin.md), as the users submit them: before A's window B's jobs use the
reserved GPUs only where `now + -t` ends by its start (one that would run into it waits as
`Reservation`, saying so, until B shortens it; one without -t never starts there), unless the
reservation allows unlimited jobs; A's own jobs use them at any time. During a group's
window its members (from the user database) start on its GPUs and nobody else does."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from helpers import wait_until
from test_system_mode import System
from userkit import TEAM, A, B

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


@pytest.fixture
def system(daemon: Any) -> System:
    return System(daemon)


def _reserve(system: System, *args: str) -> dict[str, Any]:
    out = system.rig.berth("admin", "reserve", "--json", *args)
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout)["reservation"])


def _reason(system: System, job_id: int) -> str:
    return str(system.rig.job(job_id).get("reason") or "")


def test_before_the_window_only_jobs_that_end_by_its_start_use_the_gpus(system: System) -> None:
    system.start()
    r = _reserve(system, "--user", A, "-g", "4", "--start", "now+1h", "--duration", "1h")
    into = system.submit(B, "-t", "2h", "--", "true")  # would still run when it opens
    open_ended = system.submit(B, "--", "true")  # no -t: could run into it
    wait_until(lambda: _reason(system, into).startswith("Reservation"), timeout=15,
               message="B's 2-hour job kept off A's GPUs")  # fmt: skip
    assert _reason(system, into).endswith(
        f"(reservation {r['id']}); its time limit 2:00:00 would run into it")
    wait_until(lambda: _reason(system, open_ended).startswith("Reservation"), timeout=15,
               message="B's job without -t kept off")  # fmt: skip
    fits = system.submit(B, "-t", "30m", "--", "true")  # ends 30 min before it opens
    assert system.rig.wait_done([fits], timeout=20)[fits]["state"] == "COMPLETED"
    holders = system.submit(A, "--", "true")  # A's own: at any time, with or without -t
    assert system.rig.wait_done([holders], timeout=20)[holders]["state"] == "COMPLETED"
    assert system.rig.job(into)["state"] == "PENDING"
    assert system.rig.job(open_ended)["state"] == "PENDING"
    shorter = system.berth(B, "update", str(into), "-t", "20m")  # B makes it fit: it starts
    assert shorter.returncode == 0, shorter.stderr
    assert system.rig.wait_done([into], timeout=20)[into]["state"] == "COMPLETED"
    assert system.rig.job(open_ended)["state"] == "PENDING"


def test_allow_unlimited_lets_jobs_without_a_limit_use_the_gpus_before(system: System) -> None:
    system.start()
    _reserve(system, "--user", A, "-g", "4", "--start", "now+1h", "--duration", "1h",
             "--allow-unlimited")  # fmt: skip
    open_ended = system.submit(B, "--", "true")
    assert system.rig.wait_done([open_ended], timeout=20)[open_ended]["state"] == "COMPLETED"


def test_during_a_groups_window_its_members_start_and_nobody_else(system: System) -> None:
    system.start()
    r = _reserve(system, "--group", TEAM, "--gpu-ids", "0,1", "--start", "now",
                 "--duration", "1h")  # fmt: skip
    assert r["members"] == [A] and r["open"]
    b_kept = system.submit(B, "--gpu-ids", "0,1", "--", "true")
    wait_until(lambda: _reason(system, b_kept).startswith("Reservation"), timeout=15,
               message="B (not of the group) kept off its GPUs")  # fmt: skip
    assert f"GPUs 0,1 are reserved for group {TEAM} for another" in _reason(system, b_kept)
    a_in = system.submit(A, "--gpu-ids", "0,1", "--", "true")  # A: a member, by /etc/group
    assert system.rig.wait_done([a_in], timeout=20)[a_in]["state"] == "COMPLETED"
    b_elsewhere = system.submit(B, "--", "true")  # the other GPUs are everyone's
    assert system.rig.wait_done([b_elsewhere], timeout=20)[b_elsewhere]["state"] == "COMPLETED"
    assert system.rig.job(b_elsewhere)["attempts"][0]["gpus"][0] in (2, 3)
    assert system.rig.job(b_kept)["state"] == "PENDING"
