"""`berth queue` lists pending jobs in the order a pass considers them, with why (issue 27,
point 3): with fair share on, a `-p 10` job of a user with usage may come after a `-p 0` job of
a user without; the listing says so (its place, priority, share factor, wait) instead of
showing them in the opposite order."""

from __future__ import annotations

import os
import time

import pytest
from test_system_mode import System
from userkit import A, B

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


def test_queue_lists_in_the_order_jobs_are_considered(daemon):
    system = System(daemon)
    from berth.daemon.store.store import Store, open_store

    os.makedirs(system.state, exist_ok=True)
    store = open_store(system.state)
    with store.tx():  # A used a lot lately: fair share puts B first
        store.db.execute(Store.USAGE_SQL, (A, 3600.0 * 100, time.time()))
    store.close()
    system.start("--max-job-time", "1h")
    blocker = system.submit(B, "-g", "4", "--", "sleep", "30")  # every GPU taken
    high = system.submit(A, "-g", "4", "-p", "10", "--", "true")
    low = system.submit(B, "-g", "4", "-p", "0", "--", "true")
    out = system.berth(B, "queue")
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if " PD " in ln]
    order = [int(ln.split()[0]) for ln in lines]
    assert order == [low, high]  # as considered: B's job first, whatever the priorities
    assert "#1 prio 0, share" in lines[0] and "#2 prio 10, share" in lines[1]
    assert "waited" in lines[0]
    system.rig.call("cancel", job_ids=[blocker])  # then they run, one at a time, as listed
    done = system.rig.wait_done([low, high], timeout=30)
    assert done[low]["state"] == done[high]["state"] == "COMPLETED"
    started = {i: system.rig.job(i)["attempts"][0]["start"] for i in (low, high)}
    assert started[low] < started[high]
