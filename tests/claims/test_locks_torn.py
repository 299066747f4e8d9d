"""A look that keeps nothing (`berth run`, `berth.acquire`, `select`, `status`) skips the
ledger files nobody locks, as /proc/locks says (issue 41.2). /proc/locks is no snapshot once
it is longer than one read (the kernel hands it out a page at a time and lets go of its lock
list in between: a lock released meanwhile shifts the rest, and a living lock is skipped).
Then a living claim looked dead, and two `berth run -g 1` shared a GPU (seen at load 15:
tests/run/test_run_many.py). Now a look trusts /proc/locks only when it came in one read."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from claimkit import logical

from berth.claims import files
from berth.claims.ledger import Ledger

G = logical()


@contextmanager
def busy_locks(tmp_path: Path) -> Iterator[None]:
    """Other processes' locks, taken after the claim (the kernel lists the newest first): 200
    held (more than a page of /proc/locks) and 50 more taken and released over and over (what
    a busy machine does)."""
    held = []
    for i in range(200):
        fd = os.open(tmp_path / f"held{i}", os.O_CREAT | os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_SH)
        held.append(fd)
    stop = threading.Event()

    def churn() -> None:
        k = 0
        while not stop.is_set():
            fds = [os.open(tmp_path / f"churn{k}.{i}", os.O_CREAT | os.O_RDWR) for i in range(50)]
            for fd in fds:
                fcntl.flock(fd, fcntl.LOCK_SH)
            for i, fd in enumerate(fds):
                os.close(fd)
                os.unlink(tmp_path / f"churn{k}.{i}")
            k += 1

    t = threading.Thread(target=churn, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()
        for fd in held:
            os.close(fd)


def test_a_living_claim_is_never_missed_while_other_locks_come_and_go(
    ledger_dir: str, tmp_path: Path
) -> None:
    mine = Ledger(ledger_dir).claim([G[0]], 1.0, None)
    assert mine is not None
    other = Ledger(ledger_dir)  # (another process's look: nothing kept)
    looks = missed = 0
    with busy_locks(tmp_path):
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            looks += 1
            if G[0].uuid not in other.scan(bodies=False).held():
                missed += 1
    mine.release()
    assert looks > 50 and missed == 0, f"{missed} of {looks} looks missed a living claim"


def test_proc_locks_is_not_trusted_when_it_takes_more_than_one_read(tmp_path: Path) -> None:
    """(Its one-read case, the fast path of a look, is what test_claims_hostile's 100,000
    planted files measure.)"""
    fds = []
    try:
        for i in range(200):
            fd = os.open(tmp_path / f"l{i}", os.O_CREAT | os.O_RDWR)
            fcntl.flock(fd, fcntl.LOCK_SH)
            fds.append(fd)
        assert files.locked_inodes() is None  # more than a page: no snapshot
    finally:
        for fd in fds:
            os.close(fd)
