"""docs/claims.md, "Claims outside the queue count like jobs": the GPUs a user holds with claims
the daemon did not make count against *that user's* `max_gpus` (and fair share); "the user is
the claim file's owner". A lease id is part of every claim file's name, which every user
reads in the ledger, and a hand-made claim may carry any name. So user B names living claim
files of their own with another's lease:

- with the lease of A's running queue job: B's GPUs must still count as B's (they were taken
  for the daemon's own job's and counted for nobody: B held 3 GPUs with `max_gpus = 1`);
- with the lease of A's `berth run` claim: they must count as B's, never as A's (A's queue
  job waited `UserGpuLimit` for B's GPUs, or B's for A's).

Needs root (to act as the users), as CI runs the suite.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest
from helpers import wait_until
from test_system_mode import System
from userkit import A, AsUser, B

from berth.claims import files
from berth.claims.ledger import Ledger

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


def _planted(uuids: list[str], lease: str, claims: str) -> Any:
    """(Run as B) living claim files of B's on ``uuids``, named with ``lease``."""

    def make() -> str:
        import time

        for uuid in uuids:
            body = files.encode_body(
                {"v": 1, "lease": lease, "gpu": uuid, "index": None, "gpus": uuids,
                 "share": 1.0, "mem": 0, "uid": os.geteuid(), "user": B,
                 "pids": [os.getpid()], "command": "planted", "since": time.time(),
                 "label": "planted"}
            )  # fmt: skip
            files.create_locked(claims, files.claim_name(uuid, lease, 1.0, 0), body, lease)
        return lease

    return make


def _acquire(only: str) -> Any:
    def hold() -> str:
        import berth

        lease = berth.acquire(only=only, timeout=5)
        globals()["_held"] = lease  # (held until the child is killed)
        return str(lease.lease_id)

    return hold


@pytest.fixture
def system(daemon: Any, monkeypatch: pytest.MonkeyPatch) -> System:
    s = System(daemon)
    daemon.env["BERTH_CLAIMS_DIR"] = s.run
    monkeypatch.setenv("BERTH_CLAIMS_DIR", s.run)
    with open(s.config, "a") as f:
        f.write("[limits]\nmax_gpus = 1\n")
    s.start()
    state = os.path.join(s.base, "nvml.json")  # (the users' clients read the fake GPUs too)
    shutil.copy(daemon.fake.state_path, state)
    os.chmod(state, 0o644)
    monkeypatch.setenv("FAKE_NVML_STATE", state)
    return s


def _reason(system: System, job: int) -> str:
    return str(system.rig.job(job).get("reason") or "")


def _claims_of(system: System, job: int) -> Any:
    lease = system.rig.job(job)["attempts"][-1].get("lease")
    found = [c for c in Ledger(system.run).scan().claims if c.uid == 0 and c.pids]
    return [c for c in found if lease is None or c.lease == lease]


def test_claims_named_with_a_queue_jobs_lease_count_for_their_owner(system: System) -> None:
    job = system.submit(A, "-g", "1", "--", "sleep", "60")
    (claim,) = wait_until(lambda: _claims_of(system, job), timeout=20, message="A's job claims")
    others = [u for u in system.rig.fake.uuids if u != claim.uuid]
    users = AsUser()
    try:
        users.start(B, _planted(others[:2], claim.lease, system.run), hold=True)
        mine = system.submit(B, "-g", "1", "--", "sleep", "60")  # one GPU is still free
        wait_until(lambda: "holds 2 of 1 GPUs" in _reason(system, mine), timeout=20,
                   message=f"B's job to wait for B's limit: {_reason(system, mine)}")  # fmt: skip
        assert system.rig.job(mine)["state"] == "PENDING"
    finally:
        users.cleanup()
        system.rig.call("cancel", job_ids=[job])


def test_claims_named_with_anothers_berth_run_lease_count_for_their_owner(
    system: System,
) -> None:
    assert system.rig.berth("admin", "limits", A, "--max-gpus", "2").returncode == 0
    uuids = system.rig.fake.uuids
    users = AsUser()
    try:
        _, lease = users.start(A, _acquire("0"), hold=True)  # A's `berth run`: GPU 0
        users.start(B, _planted([uuids[1]], lease, system.run), hold=True)  # B's: GPU 1
        theirs = system.submit(A, "-g", "1", "--", "sleep", "60")  # A holds 1 of 2: runs
        wait_until(lambda: system.rig.job(theirs)["state"] == "RUNNING", timeout=20,
                   message=f"A's job to start: {_reason(system, theirs)}")  # fmt: skip
        mine = system.submit(B, "-g", "1", "--", "sleep", "60")  # B holds 1 of 1: waits
        wait_until(lambda: "holds 1 of 1 GPUs" in _reason(system, mine), timeout=20,
                   message=f"B's job to wait for B's limit: {_reason(system, mine)}")  # fmt: skip
        system.rig.call("cancel", job_ids=[theirs, mine])
    finally:
        users.cleanup()
