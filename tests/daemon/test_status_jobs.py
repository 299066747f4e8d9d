"""`berth status` names a queue job's GPUs as its user's (issue 40.3): on the system daemon
a job's claim file is the daemon's (root's), and status said "claimed by root"; an array's
task is named as the CLI names it everywhere (``2_1``), never by its internal id. A claim
file another user plants with a job's lease in its name stays theirs."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import pytest
from helpers import wait_until
from test_system_mode import System
from userkit import A, AsUser, B, berth_as

from berth.claims import files
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


def _planted(uuid: str, lease: str, claims: str) -> Any:
    """(Run as B) a living claim file of B's on ``uuid`` named with ``lease``: another's job's."""

    def make() -> str:
        import time

        body = files.encode_body(
            {"v": 1, "lease": lease, "gpu": uuid, "index": None, "gpus": [uuid], "share": 1.0,
             "mem": 0, "uid": os.geteuid(), "user": A, "pids": [os.getpid()],
             "command": "planted", "since": time.time(), "label": f"berth job 1 ({A})"}
        )  # fmt: skip
        files.create_locked(claims, files.claim_name(uuid, lease, 1.0, 0), body, lease)
        return lease

    return make


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")
def test_a_claim_file_named_with_a_jobs_lease_is_its_owners_not_the_jobs(
    daemon: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the daemon's own file of a running job's lease is shown as the job's: B plants a
    living claim file named with A's job's lease (its body says A, "berth job 1"): status
    shows it as B's, as the kernel says (the file's owner)."""
    system = System(daemon)
    daemon.env["BERTH_CLAIMS_DIR"] = system.run
    monkeypatch.setenv("BERTH_CLAIMS_DIR", system.run)
    system.start()
    state = os.path.join(system.base, "nvml.json")
    shutil.copy(system.rig.fake.state_path, state)
    os.chmod(state, 0o644)
    monkeypatch.setenv("FAKE_NVML_STATE", state)
    job = system.submit(A, "-J", "one", "--", "sleep", "60")
    (claim,) = wait_until(
        lambda: [c for c in Ledger(system.run).scan().claims if c.pids], timeout=20,
        message="the job's claim",
    )  # fmt: skip
    free = next(u for u in daemon.fake.uuids if u != claim.uuid)
    users = AsUser()
    try:
        users.start(B, _planted(free, claim.lease, system.run), hold=True)
        text = berth_as(A, "status").stdout
        assert text.count(f"(berth job {job})") == 1, text  # (its own, on its GPU)
        assert f"claimed by {B} pid " in text and ": planted" in text, text
        data = json.loads(berth_as(A, "status", "--json").stdout)["claims"]["claims"]
        planted = [c for c in data if c["uuid"] == free]
        assert len(planted) == 1 and planted[0]["user"] == B and "job" not in planted[0]
    finally:
        users.cleanup()
