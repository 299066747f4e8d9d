"""The daemon's kept listing of the ledger (berth.claims.listing) reads its inotify queue
once a look (issue 35.3): a read that left room for another event emptied the queue (no
second read to learn so), and the names a look considers are the ones it has just applied
(not read again). What each look sees is unchanged: a claimer elsewhere whose file was made
before the look is seen by it."""

from __future__ import annotations

import os

import pytest
from claimkit import logical

from berth import inotify
from berth.claims.ledger import Ledger
from berth.claims.together import Want, claim_each

G = logical()


def _count_reads(monkeypatch: pytest.MonkeyPatch, fd: int) -> list[int]:
    reads: list[int] = []
    real = os.read

    def read(f: int, n: int) -> bytes:
        if f == fd:
            reads.append(n)
        return real(f, n)

    monkeypatch.setattr(os, "read", read)
    return reads


def test_a_pass_s_claims_read_the_listing_s_queue_once(
    ledger_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(ledger_dir, keep=True)
    assert ledger.listing is not None and ledger.listing.fd is not None
    ledger.scan()  # (listed once: from now on, events)
    reads = _count_reads(monkeypatch, ledger.listing.fd)
    other = Ledger(ledger_dir).claim([G[1]], 1.0, None)  # (another claimer, before the look)
    assert other is not None
    got = claim_each(ledger, [Want([G[0]], 1.0, None), Want([G[1]], 1.0, None)])
    assert len(reads) == 1  # (was 3: the events, the empty queue, the names considered)
    assert got[0] is not None and got[1] is None  # (the other's file was seen)
    del reads[:]
    assert set(ledger.scan().held()) == {G[0].uuid, G[1].uuid}
    assert len(reads) == 1  # (nothing new: one read that finds the queue empty)
    got[0].release()
    other.release()
    assert set(ledger.scan().held()) == set()
    assert ledger.listing.relisted == 1  # (never listed again: the events kept it)


def test_a_full_read_reads_again_until_the_queue_is_empty(
    ledger_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More events than one read holds: every one is read (the queue is read until a read
    leaves room for another event)."""
    fd = inotify.watch([ledger_dir], inotify.IN_CREATE)
    assert fd is not None
    try:
        names = [f"c.{'x' * 200}.{i:05d}" for i in range(400)]  # (~90 KB of events)
        for name in names:
            open(os.path.join(ledger_dir, name), "w").close()
        reads = _count_reads(monkeypatch, fd)
        got = [name for _, name in inotify.events(fd)]
        assert got == names
        assert len(reads) == 2
    finally:
        os.close(fd)
