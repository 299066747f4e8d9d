"""docs/admin.md, "Enforcement": a claim's processes are "the processes of the claim file's
owner that hold the claim file"; a process of another user on a GPU berth gave to a job is an
intrusion. A lease id is only part of a file's name (every user reads them in /run/berth),
so user A names a hand-made claim file of their own with the lease of B's running job, on
B's GPU, holds it from their 30 GB process: that process must stay an intrusion on B's job
(killed under `intrusion = "kill"`), not pass for the job's own (it did: never found).

Needs root (to create the users and run as them), as CI runs the suite.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from helpers import wait_until
from test_enforce_hostile import SLEEPER, G, _job_pid, _log, _register, system, users_uid
from test_system_mode import System
from userkit import A, AsUser, B

from berth.claims import files
from berth.claims.ledger import Ledger

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")

__all__ = ["system"]  # (the fixture, from test_enforce_hostile)


def _plant_as(uuid: str, lease: str, claims: str) -> Any:
    """(Run as A) a living claim file of A's on ``uuid`` named with ``lease`` (B's job's)."""

    def plant() -> str:
        name = files.claim_name(uuid, lease, 0.001, 1 << 20)
        body = files.encode_body(
            {"v": 1, "lease": lease, "gpu": uuid, "index": None, "gpus": [uuid],
             "share": 0.001, "mem": 1 << 20, "uid": os.geteuid(), "user": "x",
             "pids": [os.getpid()], "command": "named like the job's", "since": time.time(),
             "label": None}
        )  # fmt: skip
        files.create_locked(claims, name, body, lease)
        return name

    return plant


def test_a_claim_file_named_with_a_jobs_lease_does_not_make_its_process_the_jobs(
    system: System,
) -> None:
    system.start("--poll-interval", "0.2")
    users: AsUser = system.users  # type: ignore[attr-defined]
    job = system.submit(B, "-g", "1", "--", "/usr/bin/python3", "-c", SLEEPER)
    victim = _job_pid(system, job)
    gpu = system.rig.job(job)["attempts"][-1]["gpus"][0]
    uuid = system.rig.fake.uuids[gpu]
    _register(system, victim, gpu, 1 * G)
    (theirs,) = [c for c in Ledger(system.run).scan().claims if c.uid == 0 and c.uuid == uuid]
    hog, _ = users.start(A, _plant_as(uuid, theirs.lease, system.run), hold=True)
    _register(system, hog, gpu, 30 * G)
    killed = wait_until(
        lambda: next(
            (e for e in _log(system) if e.get("pid") == hog and e["action"] == "signal"), None
        ),
        timeout=20,
        message="A's process on B's GPU to be killed as an intrusion",
    )
    assert killed["class"] == "intrusion" and f"job {job}" in killed["victim"]
    assert killed["uid"] == users_uid(A) and killed["holder"] != f"job {job}"
    assert system.rig.job(job)["state"] == "RUNNING"  # B's job untouched
    system.rig.call("cancel", job_ids=[job])
