"""Someone acting on what is another user's hears that first (issue 40.6): `berth release` of a
GPU another user's queue job holds refuses a non-admin before asking them to confirm (before:
"cancel job(s) N through the daemon? [y/N]"), and `berth update` of another user's running job
answers about ownership, not about the job's state. Needs root (other users), as CI runs."""

from __future__ import annotations

import os
from typing import Any

import pytest
from helpers import wait_until
from test_system_mode import System
from userkit import A, B

from berth.claims.ledger import Ledger

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


@pytest.fixture
def system(daemon: Any) -> System:
    """The system daemon, its claims in a directory every user reaches (as /run/berth), on two
    declared GPUs (the fake NVML's state is root's: users read the same GPUs from config)."""
    system = System(daemon)
    daemon.env["BERTH_CLAIMS_DIR"] = system.run
    with open(system.config) as f:
        text = f.read()
    with open(system.config, "w") as f:
        f.write(text.replace("[claims]\n", f'[inventory]\ngpus = 2\n[claims]\ndir = "{system.run}"\n'))
    return system


def test_others_hear_about_ownership_first(system: System) -> None:
    system.start()
    job = system.submit(A, "-g", "1", "--", "sleep", "600")
    wait_until(lambda: Ledger(system.run).scan().claims, timeout=15, message="A's job runs")
    (c,) = Ledger(system.run).scan().claims

    out = system.berth(B, "release", str(c.index))  # no -y: it must not ask
    assert out.returncode == 4, (out.stdout, out.stderr)
    assert "[y/N]" not in out.stdout, out.stdout
    assert f"job {job} of {A}" in out.stderr and "only root" in out.stderr, out.stderr

    out = system.berth(B, "update", str(job), "-t", "10")
    assert out.returncode == 4, (out.stdout, out.stderr)
    assert A in out.stderr and "running" not in out.stderr.split(A)[0], out.stderr
    assert system.rig.job(job)["state"] == "RUNNING"  # nothing was done to it
    assert Ledger(system.run).scan().claims
