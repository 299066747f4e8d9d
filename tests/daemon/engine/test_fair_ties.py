"""Fair share between users of equal usage on the system daemon (docs/scheduling.md, "Fair
share between users"): two users new to the daemon (both have used nothing) are a tie, and
the policy's order decides, as for one user: B, who submitted first, starts first. Ties
went to the name, so A (`berth-sys-a`) always passed B (`berth-sys-b`), under `fifo` too."""

from __future__ import annotations

import os
from typing import Any

import pytest
from helpers import wait_until
from test_system_mode import System
from userkit import A, B

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


@pytest.fixture
def system(daemon: Any) -> System:
    return System(daemon)


@pytest.mark.parametrize("policy", ["fifo", "guarded"])
def test_two_new_users_go_in_the_policys_order_not_by_name(system: System, policy: str) -> None:
    system.rig.fake.setup(n=1, memory="80G")
    system.start("--policy", policy)
    gate = os.path.join(system.shared, "gate")
    holder = system.rig.submit("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done")
    wait_until(lambda: system.rig.job(holder)["state"] == "RUNNING", timeout=15)
    first = system.submit(B, "-t", "10m", "--", "true")
    second = system.submit(A, "-t", "10m", "--", "true")
    with open(gate, "w"):
        pass
    done = system.rig.wait_done([holder, first, second], timeout=30)
    assert {r["state"] for r in done.values()} == {"COMPLETED"}
    starts = {j: system.rig.job(j)["attempts"][0]["start"] for j in (first, second)}
    assert starts[first] < starts[second], f"{policy}: {A}'s later job started first"
