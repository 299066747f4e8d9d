"""Dependencies between users on the system daemon (docs/scheduling.md, "Dependencies"), as
the users type them: `singleton` waits for the caller's own jobs of that name only ("no
other job of yours"), `@` is the caller's own last job, known from the socket ("the daemon
knows who you are from the socket"), never another user's later one, and a user who has
none is refused, nothing queued, whatever others submitted."""

from __future__ import annotations

import os
from typing import Any

import pytest
from helpers import wait_until
from test_system_mode import System
from userkit import A, B, C

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


@pytest.fixture
def system(daemon: Any) -> System:
    return System(daemon)


def test_singleton_waits_for_the_callers_own_jobs_of_that_name_only(system: System) -> None:
    system.start()
    gate = os.path.join(system.shared, "gate")
    wait = f"while [ ! -e {gate} ]; do sleep 0.02; done"
    a_first = system.submit(A, "-J", "sweep", "--", "sh", "-c", wait)
    wait_until(lambda: system.rig.job(a_first)["state"] == "RUNNING", timeout=15,
               message="A's sweep runs")  # fmt: skip
    a_next = system.submit(A, "-J", "sweep", "-d", "singleton", "--", "true")
    b_same = system.submit(B, "-J", "sweep", "-d", "singleton", "--", "true")
    # B's job of the same name is not held back by A's: it is no job of B's
    assert system.rig.wait_done([b_same], timeout=20)[b_same]["state"] == "COMPLETED"
    mine = system.rig.job(a_next)
    assert mine["state"] == "PENDING"
    assert mine["reason"] == f"Dependency: waiting for singleton (job {a_first} of that name is RUNNING)"
    with open(gate, "w"):
        pass
    done = system.rig.wait_done([a_first, a_next], timeout=20)
    assert done[a_next]["state"] == "COMPLETED"
    first, then = (system.rig.job(i)["attempts"][0] for i in (a_first, a_next))
    assert then["start"] >= first["end"]


def test_at_is_the_callers_own_last_job_never_another_users(system: System) -> None:
    system.start()
    b_last = system.submit(B, "--hold", "--", "true")
    a_later = system.submit(A, "--hold", "--", "true")  # after B's: the queue's last job
    b_dep = system.submit(B, "-d", "afterok:@", "--", "true")
    assert system.rig.job(b_dep)["dependency"] == f"afterok:{b_last}", "B's @ named A's job"
    a_dep = system.submit(A, "-d", "afterany:@", "--", "true")
    assert system.rig.job(a_dep)["dependency"] == f"afterany:{a_later}"
    before = [r["id"] for r in system.rig.call("queue", all=True)["jobs"]]
    refused = system.berth(C, "submit", "-d", "afterok:@", "--", "true")
    assert refused.returncode != 0
    assert f"@ is your last submitted job, and {C} has none on record here" in refused.stderr
    assert [r["id"] for r in system.rig.call("queue", all=True)["jobs"]] == before
    # B's dependency follows B's job, not A's: released, B's runs while A's is still held
    assert system.berth(B, "release-job", str(b_last)).returncode == 0
    assert system.rig.wait_done([b_last, b_dep], timeout=20)[b_dep]["state"] == "COMPLETED"
    assert system.rig.job(a_dep)["state"] == "PENDING"
