"""Hostile local users against a root system daemon's enforcement: a claim file made by hand
(the ledger's own format, through berth's own helpers, skipping the check that withdraws a
claim that does not fit) on a GPU others hold is not granted (issue 41.1, the dodge). Its
holder's processes are nobody's, judged by NVML alone: an intrusion on the GPU granted to
others, killed, while the holders that were there first are untouched.

Needs root (to create the users and run as them), as CI runs the suite.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest
from helpers import wait_until
from test_enforce_hostile import (
    SLEEPER,
    G,
    _claim_gpu,
    _findings,
    _job_pid,
    _log,
    _register,
    alive,
    system,
    users_uid,
)
from test_system_mode import System
from userkit import A, AsUser, B

from berth.claims import files
from berth.claims.ledger import Ledger
from berth.claims.state import ClaimInfo
from berth.daemon.engine.enforce_grant import Grants

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")

__all__ = ["system"]  # (the fixture, shared with test_enforce_hostile)


def _info(lease: str, ident: tuple[int, int], placed: int) -> ClaimInfo:
    c = ClaimInfo(f"c.u1.{lease}.1000.0", "", ("u1", lease, 1.0, 0))
    c.ident, c.placed, c.uid = ident, placed, 1000
    return c


def test_the_enforcer_keeps_the_earliest_ctime_seen_of_each_file() -> None:
    """A ctime moved forward after the first look (a link, where fs.protected_hardlinks is
    off) does not move a claim back in line behind a claim made by hand since."""
    grants = Grants()
    gpus = {"u1": (1, 80 * G)}
    first = _info("aaaa", (1, 1), 10)
    assert grants.judge([first], {}, set(), [], gpus) == {}
    bumped, hand = _info("aaaa", (1, 1), 30), _info("bbbb", (1, 2), 20)
    assert grants.judge([bumped, hand], {}, set(), [], gpus) == {
        "claim bbbb": "claim bbbb on GPU 1 placed after claim aaaa's exclusive claim: "
        "together they overfill the GPU (shares): not granted"
    }
    assert Grants().judge([bumped, hand], {}, set(), [], gpus).keys() == {"claim aaaa"}


def test_the_daemons_own_claims_are_never_refused() -> None:
    grants = Grants()
    gpus = {"u1": (1, 80 * G)}
    hand, job = _info("bbbb", (1, 2), 10), _info("jobl", (1, 3), 10)
    assert grants.judge([hand, job], {"jobl": "job 7"}, {"job 7"}, [], gpus).keys() == {
        "claim bbbb"
    }


def test_a_claim_not_granted_on_one_of_its_gpus_is_granted_on_none() -> None:
    grants = Grants()
    gpus = {"u1": (1, 80 * G), "u2": (2, 80 * G)}
    job = _info("jobl", (1, 1), 10)
    job.uuid = "u2"
    hand = [_info("bbbb", (1, 2), 20), _info("bbbb", (1, 3), 20)]
    hand[1].uuid = "u2"  # (free GPU 1, and GPU 2 the job holds)
    refused = grants.judge([job, *hand], {"jobl": "job 7"}, {"job 7"}, [], gpus)
    assert refused == {
        "claim bbbb": "claim bbbb on GPU 2 placed after job 7's exclusive claim: together "
        "they overfill the GPU (shares): not granted"
    }


def _hand_made(uuid: str, share: float, mem: int, claims: str) -> Any:
    """(Run as A) a claim of ``share`` and ``mem`` on ``uuid`` made by hand: the ledger's
    file format, name, body, crc and shared flock (held by this process), without the check
    that would have withdrawn it (berth.claims.verify)."""

    def make() -> str:
        import time

        lease = files.new_lease_id()
        body = files.encode_body(
            {"v": 1, "lease": lease, "gpu": uuid, "index": None, "gpus": [uuid],
             "share": share, "mem": mem, "uid": os.geteuid(), "user": "x",
             "pids": [os.getpid()], "command": "hand-made", "since": time.time(),
             "label": None}
        )  # fmt: skip
        files.create_locked(claims, files.claim_name(uuid, lease, share, mem), body, lease)
        return lease

    return make


def _signalled(system: System, pid: int) -> dict[str, Any]:
    found: dict[str, Any] = wait_until(
        lambda: next(
            (e for e in _log(system) if e.get("pid") == pid and e["action"] == "signal"), None
        ),
        timeout=20,
        message=f"process {pid} to be killed",
    )
    return found


def test_a_hand_made_claim_on_anothers_exclusive_gpu_is_not_granted(system: System) -> None:
    """B's job runs on a GPU of its own; A makes a claim file on that GPU by hand (share 1,
    30 GiB declared), holds it in a process that uses 30 GiB there. Before: A's process was
    proven the claim's own, within what it declared: never a finding, never killed (the
    dodge). Now the claim, placed after the job's, is not granted: A's process is an
    intrusion on B's job's GPU, killed; the audit log says why; B's job runs on."""
    system.start("--poll-interval", "0.2")
    users: AsUser = system.users  # type: ignore[attr-defined]
    job = system.submit(B, "-g", "1", "--", "/usr/bin/python3", "-c", SLEEPER)
    victim = _job_pid(system, job)
    gpu = system.rig.job(job)["attempts"][-1]["gpus"][0]
    _register(system, victim, gpu, 1 * G)
    uuid = system.rig.fake.uuids[gpu]
    hog, lease = users.start(A, _hand_made(uuid, 1.0, 30 * G, system.run), hold=True)
    assert any(c.lease == lease for c in Ledger(system.run).scan().claims)  # alive
    _register(system, hog, gpu, 30 * G)
    killed = _signalled(system, hog)
    assert killed["class"] == "intrusion" and killed["victim"] == f"job {job}"
    assert killed["holder"] is None and killed["uid"] == users_uid(A)
    why = f"claim {lease} on GPU {gpu} placed after job {job}'s exclusive claim"
    assert why in killed["proof"] and "not granted" in killed["proof"]
    refused = [e for e in _log(system) if e["action"] == "refuse"]
    assert [e["holder"] for e in refused] == [f"claim {lease}"]
    assert refused[0]["reason"].startswith(why) and refused[0]["reason"].endswith("not granted")
    text = system.rig.berth("admin", "log").stdout
    assert f"refuse ungranted  GPUs {gpu}" in text and why in text
    wait_until(  # a later pass, which saw A's process gone: every earlier action is logged
        lambda: all(f["pid"] != hog for f in _findings(system)),
        timeout=20,
        message="a pass after A's process ended",
    )
    assert [e for e in _log(system) if e.get("pid") == victim] == []
    assert system.rig.job(job)["state"] == "RUNNING" and alive(victim)
    assert all(f["pid"] != victim for f in _findings(system))  # B's own, no finding


def test_two_shares_stand_a_third_made_by_hand_does_not(
    system: System, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A and B each hold half of GPU 1 through the ledger; A makes a third half by hand and
    uses 10 GiB in the process that holds it. The two halves stand (their processes are
    their own: no finding), the third is not granted: its process is an intrusion on both,
    killed. Before: all three were claims, the third's process its own."""
    state = os.path.join(system.base, "nvml.json")  # (the claimers read NVML)
    system.rig.fake.setup(n=4, memory="80G")
    shutil.copy(system.rig.fake.state_path, state)
    os.chmod(state, 0o644)
    monkeypatch.setenv("FAKE_NVML_STATE", state)
    system.start("--poll-interval", "0.2")
    users: AsUser = system.users  # type: ignore[attr-defined]
    first, _ = users.start(A, _claim_gpu(1, 0.5), hold=True)
    second, _ = users.start(B, _claim_gpu(1, 0.5), hold=True)
    _register(system, first, 1, 10 * G)
    _register(system, second, 1, 10 * G)
    uuid = system.rig.fake.uuids[1]
    third, lease = users.start(A, _hand_made(uuid, 0.5, 0, system.run), hold=True)
    assert len([c for c in Ledger(system.run).scan().claims if c.uuid == uuid]) == 3
    _register(system, third, 1, 10 * G)
    killed = _signalled(system, third)
    assert killed["class"] == "intrusion" and killed["holder"] is None
    assert f"claim {lease} on GPU 1 placed after claim " in killed["proof"]
    assert killed["victim"] is not None and len(killed["victim"].split(", ")) == 2
    refused = [e for e in _log(system) if e["action"] == "refuse"]
    assert [e["holder"] for e in refused] == [f"claim {lease}"]
    wait_until(
        lambda: all(f["pid"] != third for f in _findings(system)),
        timeout=20,
        message="a pass after the third's process ended",
    )
    for pid in (first, second):
        assert [e for e in _log(system) if e.get("pid") == pid] == []
        assert all(f["pid"] != pid for f in _findings(system)) and alive(pid)
