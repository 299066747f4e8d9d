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


def _claim(uuid: str, index: int, claims: str) -> Any:
    """(Run as A) A's own claim of GPU ``uuid``, made through the ledger (as `berth run`
    makes it) and held; its lease."""

    def hold() -> str:
        claim = Ledger(claims).try_claim([uuid], share=1.0, memory_total={uuid: 80 * G},
                                         indices={uuid: index}, command="A's work")  # fmt: skip
        assert claim is not None
        globals()["_held"] = claim  # (held until the child is killed)
        return str(claim.lease_id)

    return hold


def test_a_claim_file_named_with_anothers_lease_does_not_ungrant_their_claim(
    system: System,
) -> None:
    """A holds a GPU with a claim of their own (as `berth run` does). B names a hand-made
    claim file with A's lease on B's job's GPU, where it does not fit (placed after the job's
    exclusive claim) and holds it from a 30 GB process. B's process is an intrusion (killed);
    A's claim stays granted, A's process on A's GPU untouched (A's claim was judged with B's
    file as one claim: not granted, A's process nobody's, killed as outside berth)."""
    with open(system.config, "a") as f:
        f.write('outside = "kill"\n')  # (in [enforce], the config's last section)
    system.start("--poll-interval", "0.2")
    users: AsUser = system.users  # type: ignore[attr-defined]
    job = system.submit(B, "-g", "1", "--", "/usr/bin/python3", "-c", SLEEPER)
    victim = _job_pid(system, job)
    gpu = system.rig.job(job)["attempts"][-1]["gpus"][0]
    _register(system, victim, gpu, 1 * G)
    mine = next(i for i in range(len(system.rig.fake.uuids)) if i != gpu)
    holder, lease = users.start(A, _claim(system.rig.fake.uuids[mine], mine, system.run),
                                hold=True)  # fmt: skip
    _register(system, holder, mine, 5 * G)
    hog, _ = users.start(B, _plant_as(system.rig.fake.uuids[gpu], lease, system.run), hold=True)
    _register(system, hog, gpu, 30 * G)
    wait_until(
        lambda: any(e.get("pid") == hog and e["action"] == "signal" for e in _log(system)),
        timeout=20, message="B's process on B's job's GPU to be killed as an intrusion",
    )  # fmt: skip
    wait_until(  # (later polls: B's process gone from the findings)
        lambda: all(f["pid"] != hog for f in system.rig.call("status")["enforce"]["findings"]),
        timeout=20, message="B's process gone",
    )  # fmt: skip
    entries = _log(system)
    assert not [e for e in entries if e.get("pid") == holder], entries
    assert not [e for e in entries if e["action"] == "refuse" and e.get("uid") == users_uid(A)]
    os.kill(holder, 0)  # A's process lives
    assert all(f["pid"] != holder for f in system.rig.call("status")["enforce"]["findings"])
    system.rig.call("cancel", job_ids=[job])
