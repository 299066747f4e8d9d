"""Hostile local users against a root system daemon's enforcement (issue 41: the claim ledger
is untrusted input). A process is a claim's only if the kernel says so: its uid is the claim
file's owner (fstat) and it holds the claim file (or descends from a process that does);
a claim body's ``pids`` are hints, never facts. And under ``--private`` the claim files the
daemon writes for its jobs carry no command that others could read in `berth status`.

Needs root (to create the users and run as them), as CI runs the suite.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import wait_until
from test_system_mode import System
from userkit import A, AsUser, B, berth_as, ensure_users

from berth.claims import files
from berth.claims.ledger import Ledger

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")

G = 1 << 30

SLEEPER = "import os, time; print(os.getpid(), flush=True); time.sleep(600)"


@pytest.fixture
def system(daemon: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[System]:
    """The system daemon, its claims in a directory every user reaches (as /run/berth),
    intrusions and overruns killed at once."""
    ensure_users()
    system = System(daemon)
    daemon.env["BERTH_CLAIMS_DIR"] = system.run
    monkeypatch.setenv("BERTH_CLAIMS_DIR", system.run)  # (users' `berth status`, in-process)
    with open(system.config) as f:
        text = f.read()
    text = text.replace("[claims]\n", f'[claims]\ndir = "{system.run}"\n')
    with open(system.config, "w") as f:
        f.write(text + '[enforce]\nintrusion = "kill"\noverrun = "kill"\ngrace = 0\n')
    users = AsUser()
    system.users = users  # type: ignore[attr-defined]
    try:
        yield system
    finally:
        users.cleanup()


def _register(system: System, pid: int, gpu: int, mem: int) -> None:
    """Make the fake NVML list process ``pid`` on GPU ``gpu`` using ``mem`` bytes."""
    fake = system.rig.fake
    os.makedirs(fake.procs_dir, exist_ok=True)
    path = os.path.join(fake.procs_dir, str(pid))
    with open(path + ".tmp", "w") as f:
        f.write(f"{fake.uuids[gpu]} {mem} 50 0 compute\n")
    os.replace(path + ".tmp", path)


def _job_pid(system: System, job: int) -> int:
    """The pid the job printed (its own: SLEEPER)."""

    def said() -> int | None:
        try:
            with open(system.rig.job(job)["stdout"]) as f:
                words = f.read().split()
        except OSError:
            return None
        return int(words[0]) if words else None

    pid: int = wait_until(said, timeout=20, message=f"job {job} to print its pid")
    return pid


def _log(system: System) -> list[dict[str, Any]]:
    out = system.rig.berth("admin", "log", "--json")
    assert out.returncode == 0, out.stderr
    entries: list[dict[str, Any]] = json.loads(out.stdout)["entries"]
    return entries


def _findings(system: System) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = system.rig.call("status")["enforce"]["findings"]
    return found


def _plant(uuid: str, pids: list[int], claims: str) -> Any:
    """(Run as A) a claim file of A's own on ``uuid`` that looks right in every way (name,
    body, crc, a shared flock held by this process), declaring 1 MiB, its body naming
    ``pids`` as its processes."""

    def plant() -> str:
        lease = files.new_lease_id()
        name = files.claim_name(uuid, lease, 0.001, 1 << 20)
        body = files.encode_body(
            {"v": 1, "lease": lease, "gpu": uuid, "index": None, "gpus": [uuid],
             "share": 0.001, "mem": 1 << 20, "uid": os.geteuid(), "user": "x",
             "pids": pids, "command": "forged", "since": time.time(), "label": None}
        )  # fmt: skip
        files.create_locked(claims, name, body, lease)
        return lease

    return plant


def test_a_forged_claim_naming_anothers_job_gets_it_killed_never(system: System) -> None:
    """A plants a claim on B's GPU whose body lists B's job pid and A's own 30 GB process
    (which does not hold the claim). Before: both were the claim's, over its 1 MiB, and
    both were killed (B's job FAILED 143); A's process was never an intrusion. Now B's
    process stays B's job's, and A's is an intrusion on B's GPU, killed, the proof in the
    audit log."""
    system.start("--poll-interval", "0.2")
    users: AsUser = system.users  # type: ignore[attr-defined]
    job = system.submit(B, "-g", "1", "--", "/usr/bin/python3", "-c", SLEEPER)
    victim = _job_pid(system, job)
    gpu = system.rig.job(job)["attempts"][-1]["gpus"][0]
    _register(system, victim, gpu, 1 * G)
    hog, _ = users.start(A, lambda: os.getpid(), hold=True)
    uuid = system.rig.fake.uuids[gpu]
    _, lease = users.start(A, _plant(uuid, [victim, hog], system.run), hold=True)
    assert any(c.lease == lease for c in Ledger(system.run).scan().claims)  # alive
    _register(system, hog, gpu, 30 * G)  # (after the claim: not killed before it was made)
    killed = wait_until(
        lambda: next(
            (e for e in _log(system) if e.get("pid") == hog and e["action"] == "signal"), None
        ),
        timeout=20,
        message="A's process on B's GPU to be killed",
    )
    assert killed["class"] == "intrusion" and f"job {job}" in killed["victim"]
    assert killed["holder"] is None and killed["uid"] == users_uid(A)
    assert "does not hold" in killed["proof"] and f"claim {lease}" in killed["proof"]
    text = system.rig.berth("admin", "log").stdout
    assert f"    proof: {killed['proof']}" in text
    wait_until(  # a later pass, which saw A's process gone: every earlier action is logged
        lambda: all(f["pid"] != hog for f in _findings(system)),
        timeout=20,
        message="a pass after A's process ended",
    )
    assert [e for e in _log(system) if e.get("pid") == victim] == []
    assert system.rig.job(job)["state"] == "RUNNING"
    assert all(f["pid"] != victim for f in _findings(system))  # B's own, no finding


def users_uid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid


def test_a_claims_own_process_is_proven_and_the_proof_is_logged(system: System) -> None:
    """The reverse check: a process of A's that holds A's claim is the claim's (an overrun of
    its 1 MiB is A's own, killed as such), the proof says which file it holds."""
    system.start("--poll-interval", "0.2")
    users: AsUser = system.users  # type: ignore[attr-defined]
    uuid = system.rig.fake.uuids[0]
    holder, lease = users.start(A, _plant(uuid, [], system.run), hold=True)
    _register(system, holder, 0, 2 * G)
    killed = wait_until(
        lambda: next(
            (e for e in _log(system) if e.get("pid") == holder and e["action"] == "signal"), None
        ),
        timeout=20,
        message="the claim's overrun to be killed",
    )
    assert killed["class"] == "overrun" and killed["holder"] == f"claim {lease}"
    assert "holds claim file c." in killed["proof"] and lease in killed["proof"]


def test_private_claim_files_carry_no_command_for_others_to_read(
    system: System, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under --private, `berth status` of another user showed the command of a job (the
    claim file the daemon wrote for it, 0644) that `berth show` hides from them."""
    system.start("--private")
    state = os.path.join(system.base, "nvml.json")  # (the rig's is where only root may go)
    shutil.copy(system.rig.fake.state_path, state)
    os.chmod(state, 0o644)
    monkeypatch.setenv("FAKE_NVML_STATE", state)
    secret = "/secret/plan-4711.py"
    job = system.submit(A, "-g", "1", "-J", "plan", "--", "/usr/bin/python3", "-c", SLEEPER,
                        secret)  # fmt: skip

    def named() -> list[Any] | None:  # the job's supervisor named itself in its claim
        claims = Ledger(system.run).scan().claims
        return claims if claims and all(c.pids for c in claims) else None

    claims = wait_until(named, timeout=20, message="the job's claim to name its holders")
    status = berth_as(B, "status")
    assert status.returncode == 0, status.stderr
    assert ": (private)" in status.stdout and secret not in status.stdout
    shown = berth_as(B, "status", "--json")
    assert secret not in shown.stdout
    assert [c.command for c in claims] == ["(private)"]
    assert [c.label for c in claims] == [f"berth job {job} (private)"]
    mine = json.loads(berth_as(A, "show", "--json", str(job)).stdout)  # the owner's view
    assert secret in mine["command"]
    theirs = json.loads(berth_as(B, "show", "--json", str(job)).stdout)
    assert theirs["command"] == "(private)"


def _claim_gpu(index: int, share: float = 1) -> Any:
    """(Run as a user) claim ``share`` of GPU ``index`` as `berth run` and berth.acquire do,
    through the ledger (its check included); the process holds it."""

    def claim() -> int:
        from berth.api.lease import build_request, claim

        claim(build_request(share, only=str(index)), timeout=0)  # (its descriptors stay open)
        return os.getpid()

    return claim


def test_a_forged_claim_naming_anothers_claim_holder_gets_it_killed_never(
    system: System, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B holds GPU 2 through a claim of their own (as `berth run` does); A plants a claim on
    GPU 3 whose body names B's process. Before: B's process was taken for A's claim's, an
    intrusion on B's own GPU, and killed."""
    state = os.path.join(system.base, "nvml.json")  # (B's process reads NVML to claim)
    system.rig.fake.setup(n=4, memory="80G")
    shutil.copy(system.rig.fake.state_path, state)
    os.chmod(state, 0o644)
    monkeypatch.setenv("FAKE_NVML_STATE", state)
    system.start("--poll-interval", "0.2")
    users: AsUser = system.users  # type: ignore[attr-defined]
    victim, _ = users.start(B, _claim_gpu(2), hold=True)
    _register(system, victim, 2, 1 * G)
    users.start(A, _plant(system.rig.fake.uuids[3], [victim], system.run), hold=True)
    outsider, _ = users.start(A, lambda: os.getpid(), hold=True)
    _register(system, outsider, 0, 1 * G)  # (observed: a pass after the forgery's shows it)
    seen = wait_until(
        lambda: next((f for f in _findings(system) if f["pid"] == outsider), None),
        timeout=20,
        message="a pass that saw every process",
    )
    assert seen["class"] == "outside" and "judged by NVML alone" in seen["proof"]
    assert all(f["pid"] != victim for f in _findings(system))  # B's claim's own
    assert [e for e in _log(system) if e.get("pid") == victim] == []
    assert os.path.exists(f"/proc/{victim}") and alive(victim)


def alive(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
