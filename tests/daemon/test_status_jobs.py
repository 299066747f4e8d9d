"""`berth status` names a queue job's GPUs as its user's (issue 40.3): on the system daemon
a job's claim file is the daemon's (root's), and status said "claimed by root"; an array's
task is named as the CLI names it everywhere (``2_1``), never by its internal id."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import pytest
from helpers import wait_until
from test_system_mode import System
from userkit import A, berth_as

from berth.claims.ledger import Ledger


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")
def test_a_users_job_is_claimed_by_them_and_array_tasks_are_named_9_1(
    daemon: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = System(daemon)
    daemon.env["BERTH_CLAIMS_DIR"] = system.run
    monkeypatch.setenv("BERTH_CLAIMS_DIR", system.run)  # (the users' `berth status`)
    system.start()
    state = os.path.join(system.base, "nvml.json")  # (the rig's is where only root may go)
    shutil.copy(system.rig.fake.state_path, state)
    os.chmod(state, 0o644)
    monkeypatch.setenv("FAKE_NVML_STATE", state)
    single = system.submit(A, "-J", "one", "--", "sleep", "60")
    array = system.submit(A, "-J", "arr", "--array", "1-2", "--", "sleep", "60")
    wait_until(  # (each supervisor named itself in its claim)
        lambda: len([c for c in Ledger(system.run).scan().claims if c.pids]) == 3,
        timeout=20,
        message="three running jobs' claims",
    )
    shown = berth_as(A, "status")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "claimed by root" not in text, text
    assert f"claimed by {A} (berth job {single}) pid " in text, text
    for task in (1, 2):
        assert f"claimed by {A} (berth job {array}_{task}) pid " in text, text
        assert f"berth job {array}_{task} (arr) of {A}" in text, text
    assert f"berth job {array + 1} " not in text  # (the internal id of task 2)
    data = json.loads(berth_as(A, "status", "--json").stdout)
    jobs = sorted((c["job"], c["job_user"], c["user"]) for c in data["claims"]["claims"])
    assert jobs == sorted(
        [(str(single), A, "root"), (f"{array}_1", A, "root"), (f"{array}_2", A, "root")]
    )  # (the file's owner stays what the kernel says; the job's user is its holder)
