"""The ledger's invariants: exclusive, shares and memory, atomic multi-GPU claims, claims
that die with their holder, corrupt bodies, and who may touch which file."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
from typing import Any

import pytest
from claimkit import GIB, Holders, logical

from berth.claims import files
from berth.claims.ledger import Ledger
from berth.claims.paths import check_dir, claims_dir
from berth.errors import UsageError

U = [g.uuid for g in logical()]
TOTAL = {u: 80 * GIB for u in U}


def test_never_two_exclusive_holders(ledger_dir: str) -> None:
    ledger = Ledger(ledger_dir)
    a = ledger.try_claim([U[0]])
    assert a is not None
    assert ledger.try_claim([U[0]]) is None
    assert ledger.try_claim([U[0]], share=0.1) is None
    a.release()
    b = ledger.try_claim([U[0]])
    assert b is not None
    b.release()


def test_shares_sum_to_at_most_one(ledger_dir: str) -> None:
    ledger = Ledger(ledger_dir)
    held = [ledger.try_claim([U[1]], share=0.4) for _ in range(2)]
    assert all(held)
    assert ledger.try_claim([U[1]], share=0.4) is None
    assert ledger.try_claim([U[1]], share=0.2) is not None
    assert ledger.try_claim([U[1]], share=0.001) is None
    assert ledger.scan().held()[U[1]].share == pytest.approx(1.0)


def test_declared_memory_fits_the_card(ledger_dir: str) -> None:
    ledger = Ledger(ledger_dir)
    for _ in range(2):
        assert ledger.try_claim([U[2]], share=0.25, mem=30 * GIB, memory_total=TOTAL)
    # a third 30G share fits by share (0.75) but not by memory (90G > 80G)
    assert ledger.try_claim([U[2]], share=0.25, mem=30 * GIB, memory_total=TOTAL) is None
    assert ledger.try_claim([U[2]], share=0.25, mem=20 * GIB, memory_total=TOTAL)
    assert ledger.scan().held()[U[2]].mem == 80 * GIB


def test_multi_gpu_claim_is_all_or_nothing(
    ledger_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(ledger_dir)
    assert ledger.try_claim([U[3]])
    assert ledger.try_claim([U[0], U[1], U[3]]) is None
    assert not [c for c in ledger.scan().claims if c.uuid in (U[0], U[1])]
    # A failure while creating the files (disk full, ...) leaves none of them behind.
    real = files.create_locked
    calls = []

    def flaky(*args: Any, **kw: Any) -> int:
        calls.append(args)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(*args, **kw)

    monkeypatch.setattr(files, "create_locked", flaky)
    with pytest.raises(OSError):
        ledger.try_claim([U[0], U[1]])
    assert [c.uuid for c in ledger.scan().claims] == [U[3]]
    assert not [n for n in os.listdir(ledger_dir) if n.startswith("t.")]


def test_claim_dies_with_its_holder(ledger_dir: str, holders: Holders) -> None:
    ledger = Ledger(ledger_dir)
    p = holders.start([U[0], U[1]])
    assert ledger.try_claim([U[1]]) is None
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    # No cleanup step: the next claim succeeds at once.
    lease = ledger.try_claim([U[0], U[1]])
    assert lease is not None
    lease.release()


def test_unlocked_file_is_dead_even_if_its_pid_lives(ledger_dir: str) -> None:
    """PID reuse cannot keep a claim alive: liveness is the lock, never a pid."""
    name = files.claim_name(U[0], "deadbeef", 1.0, None)
    body = files.encode_body({"lease": "deadbeef", "gpu": U[0], "pids": [os.getpid(), 1]})
    with open(os.path.join(ledger_dir, name), "wb") as f:
        f.write(body)
    ledger = Ledger(ledger_dir)
    assert ledger.scan().claims == []
    assert ledger.try_claim([U[0]]) is not None
    assert name not in os.listdir(ledger_dir)  # removed by the next claimer (its owner here)


def test_corrupt_body_keeps_capacity_and_is_rebuilt(ledger_dir: str, holders: Holders) -> None:
    p = holders.start([U[2]], share=0.5, mem=40 * GIB)
    ledger = Ledger(ledger_dir)
    (claim,) = ledger.scan().claims
    with open(claim.path, "r+b") as f:  # truncate mid-JSON, as a crash or a disk error might
        f.truncate(17)
    state = ledger.scan()
    (c,) = state.claims
    assert c.corrupt and c.share == 0.5 and c.memory == 40 * GIB
    assert c.user == "root" and p.pid in c.pids  # rebuilt from the kernel's view
    assert ledger.try_claim([U[2]], share=0.6) is None  # capacity from the name, not the body
    assert ledger.try_claim([U[2]], share=0.5, mem=50 * GIB, memory_total=TOTAL) is None
    assert ledger.repair(state) == 1
    (again,) = ledger.scan().claims
    assert not again.corrupt and again.pids == [p.pid]
    # Garbage that is valid JSON but fails the checksum is just as corrupt.
    with open(claim.path, "r+b") as f:
        f.write(b'{"crc": 1, "pids": [1]}')
        f.truncate()
    assert ledger.scan().claims[0].corrupt


def test_probe_does_not_mistake_a_prober_for_a_holder(ledger_dir: str) -> None:
    name = files.claim_name(U[0], "abc", 1.0, None)
    path = os.path.join(ledger_dir, name)
    with open(path, "wb") as f:
        f.write(b"{}")
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process looking at a dead file
    try:
        assert files.probe(path).alive is False
    finally:
        os.close(fd)


def test_file_names_round_trip() -> None:
    name = files.claim_name("MIG-GPU-1a2b/1/0", "f00d", 0.5, 12 * GIB + 1)
    assert "/" not in name
    assert files.parse_claim_name(name) == ("MIG-GPU-1a2b/1/0", "f00d", 0.5, 12 * GIB + (1 << 20))
    assert files.parse_claim_name("c.x.y.2000.0") is None
    assert files.parse_claim_name("c.x.y.500") is None
    assert files.decode_body(files.encode_body({"a": 1})) == {"a": 1}
    assert files.decode_body(b'{"a": 1, "crc": 5}') is None


def test_claims_dir_refuses_a_dir_another_user_controls() -> None:
    import shutil
    import tempfile
    from pathlib import Path

    top = tempfile.mkdtemp(prefix="berth-test-")
    os.chmod(top, 0o755)
    d = Path(top) / "squat"
    d.mkdir()
    os.chown(d, 65534, 65534)  # nobody
    os.chmod(d, 0o755)
    if os.geteuid() == 0:
        os.seteuid(1)  # look at it as another user (daemon)
        try:
            with pytest.raises(UsageError, match="not sticky"):
                check_dir(str(d))
            os.seteuid(0)
            os.chmod(d, 0o1777)
            os.seteuid(1)
            assert check_dir(str(d)) == str(d)
        finally:
            os.seteuid(0)
            shutil.rmtree(top)


def test_claims_dir_from_env_is_created_shared(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "new" / "claims"
    monkeypatch.setenv("BERTH_CLAIMS_DIR", str(target))
    from berth import config

    config.reset()
    try:
        assert claims_dir() == str(target)
    finally:
        config.reset()
    assert os.stat(target).st_mode & 0o7777 == 0o1777


def test_held_pids_include_gpu_processes_of_holders(ledger_dir: str, holders: Holders) -> None:
    from berth.devices.model import GpuProcess

    p = holders.start([U[0]])
    child = subprocess.Popen(["sleep", "30"], preexec_fn=None)  # a stranger
    try:
        gpu = logical(1)[0].replace(
            processes=(GpuProcess(p.pid), GpuProcess(child.pid)), logical=False
        )
        held = Ledger(ledger_dir).scan().held([gpu])
        assert p.pid in held[U[0]].pids and child.pid not in held[U[0]].pids
    finally:
        child.kill()
        child.wait()


def test_default_dir_prefers_an_existing_one(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from berth.claims import paths
    from berth.config import Config

    run, tmp = tmp_path / "run-berth", tmp_path / "tmp-berth-claims"
    monkeypatch.setattr(paths, "RUN_DIR", str(run))
    monkeypatch.setattr(paths, "TMP_DIR", str(tmp))
    monkeypatch.delenv("BERTH_CLAIMS_DIR", raising=False)
    cfg = Config()
    assert claims_dir(cfg, create=False) == str(tmp) and not run.exists()  # readers create nothing
    tmp.mkdir(mode=0o1777)
    assert claims_dir(cfg) == str(tmp) and not run.exists()  # in use: no split with /run
    tmp.rmdir()
    assert claims_dir(cfg) == str(run)  # neither: /run/berth, created shared (we are root)
    assert os.stat(run).st_mode & 0o7777 == 0o1777
    tmp.mkdir()
    assert claims_dir(cfg) == str(run)  # /run/berth wins once it exists


def test_a_hard_link_cannot_inflate_a_claim(ledger_dir: str, holders: Holders) -> None:
    holders.start([U[0]], share=0.25)
    ledger = Ledger(ledger_dir)
    (c,) = ledger.scan().claims
    # Another name for the same file (where fs.protected_hardlinks allows it): GPU 1, whole.
    os.link(c.path, os.path.join(ledger_dir, files.claim_name(U[1], "aaaa", 1.0, None)))
    state = ledger.scan()
    assert [(x.uuid, x.share) for x in state.claims] == [(U[0], 0.25)]
    assert ledger.try_claim([U[1]]) is not None


def test_scan_leaves_out_the_leases_it_is_told_to_skip(
    ledger_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's scans leave its own jobs' claims out (it counts them as its running jobs):
    their files are not even probed; every other claim is, and is returned."""
    ledger = Ledger(ledger_dir)
    own, other = ledger.try_claim([U[0]]), ledger.try_claim([U[1]])
    assert own is not None and other is not None
    probed: list[str] = []
    real = files.probe

    def probe(path: str, **kw: Any) -> files.Probe:
        probed.append(os.path.basename(path))
        return real(path, **kw)

    monkeypatch.setattr(files, "probe", probe)
    state = ledger.scan(bodies=False, clean=True, skip={own.lease_id})
    assert [c.lease for c in state.claims] == [other.lease_id]
    assert probed and all(own.lease_id not in name for name in probed)
    assert {c.lease for c in ledger.scan(bodies=False).claims} == {own.lease_id, other.lease_id}
    own.release()
    other.release()
