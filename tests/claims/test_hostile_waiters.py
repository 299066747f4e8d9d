"""Mallory (berth-test-b) makes a waiter file by hand that reserves every GPU, dated in the
future so that it never looks stopped, or held by a process that is not the one it names
(issue 20.8). A waiter is honoured only while the process it names holds it and shows life;
`berth release` shows the waiters of the GPUs it is given and ends them.

Needs root (CI runs as root): users are created, code runs as them (tests/userkit.py).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

A, MALLORY = "berth-test-a", "berth-test-b"


def _hand_made_waiter(*, future: bool, named: int | None = None) -> Any:
    """Mallory's waiter file reserving all 4 GPUs with the oldest ticket, locked by this
    process (which stays, paused), naming pid ``named`` (default: this one) in its body;
    dated in the year 2100 if ``future``."""
    import fcntl

    from berth import config
    from berth.api import read
    from berth.claims import files
    from berth.claims.paths import claims_dir

    path = claims_dir()
    uuids = [g.uuid for g in read(config.get(), all=True, process_details=False)]
    body = {
        "v": 1, "lease": "f00d", "pid": named or os.getpid(), "uid": os.geteuid(),
        "user": "mallory", "want": "4 GPUs", "command": "python train.py", "since": 0,
        "reserve": [[u, 1.0, 0] for u in uuids],
    }  # fmt: skip
    name = os.path.join(path, files.waiter_name(1, "f00d"))
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    fcntl.flock(fd, fcntl.LOCK_SH)
    os.write(fd, files.encode_body(body))
    if future:
        os.utime(fd, (4102444800, 4102444800))  # 2100-01-01
    return fd


def _claim_one() -> Any:
    from berth.api.lease import build_request, claim

    lease, _ = claim(build_request(1), timeout=1.5, poll=0.2)
    lease.release()
    return lease.indices


def _made_by_hand(shared: Any, **how: Any) -> None:
    claims_dir, run = shared
    os.mkdir(claims_dir)
    os.chmod(claims_dir, 0o1777)
    run.start(MALLORY, lambda: _hand_made_waiter(**how), hold=True)


def test_a_waiter_dated_in_the_future_does_not_reserve_for_ever(shared: Any) -> None:
    """Before issue 20 it never looked stopped: every claim waited for ever."""
    from berth.claims.ledger import Ledger

    _made_by_hand(shared, future=True)
    assert len(shared[1].start(A, _claim_one)[1]) == 1
    (w,) = Ledger().scan().waiters  # `berth status` says why it reserves nothing
    assert (w.stale, w.lapsed) == (True, "its sign of life is dated in the future")


def test_a_waiter_whose_process_does_not_hold_it_reserves_nothing(shared: Any) -> None:
    """Its body names a process that is not the one holding it (pid 1: whoever reads
    /proc/locks sees so)."""
    from berth.claims.ledger import Ledger

    _made_by_hand(shared, future=False, named=1)
    assert len(shared[1].start(A, _claim_one)[1]) == 1
    (w,) = Ledger().scan().waiters
    assert w.stale and w.lapsed is not None  # (not held by it, or by now stopped as well)


def test_release_shows_and_ends_waiters(shared: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Before issue 20 `berth release` said "no claims" and left it."""
    from berth.claims.ledger import Ledger
    from berth.cli.main import main

    _made_by_hand(shared, future=False)
    (w,) = Ledger().scan().waiters
    assert main(["release", "2", "--yes", "--grace", "5"]) == 0  # the admin (root)
    out = capsys.readouterr().out
    assert "waiter of berth-test-b" in out and f"pid {w.pid}" in out, out
    assert Ledger().scan().waiters == []
