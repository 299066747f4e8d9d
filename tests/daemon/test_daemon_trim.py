"""The daemon gives the C heap's free pages back once it has grown (berth/daemon/process.py's
Trimmer, issue 35.2): a look at its resident memory every 2 s, a trim when it grew by 4 MB
since the last one (or shrank below it), none otherwise."""

from __future__ import annotations

import asyncio

import pytest

from berth.daemon import process


def test_it_trims_when_grown_and_only_then(monkeypatch: pytest.MonkeyPatch) -> None:
    resident = [100 << 20]
    trims: list[int] = []
    monkeypatch.setattr(process, "rss", lambda: resident[0])
    loop = asyncio.new_event_loop()
    try:
        t = process.Trimmer(loop)
        t.trim = lambda pad: trims.append(pad) or 1  # (glibc's, counted)
        t._tick()
        resident[0] += process.TRIM_GROWN  # grown by exactly the bound: not yet
        t._tick()
        assert trims == []
        resident[0] += 1 << 20  # past it: trimmed, and what is resident after is the new low
        t._tick()
        assert trims == [0] and t.low == resident[0]
        t._tick()
        assert trims == [0]
        resident[0] -= 8 << 20  # below the low (freed by itself): the low follows
        t._tick()
        assert len(trims) == 2 and t.low == resident[0]
        t.stop()
    finally:
        loop.close()


def test_glibc_trim_is_found_and_gives_freed_memory_back() -> None:
    trim = process._malloc_trim()
    if trim is None:  # (musl): the trimmer does nothing
        assert process.Trimmer(asyncio.new_event_loop()).trim is None
        return
    trim(0)  # (what earlier tests in this process freed is given back: the blocks below
    # take pages of their own, not a free heap's already resident ones)
    before = process.rss()
    junk, kept = [], []  # ~60 MB of C-heap blocks (over 512 bytes), one in 100 kept
    for i in range(100_000):
        junk.append(bytes(600))
        if i % 100 == 0:
            kept.append(bytes(600))  # (as a burst's jobs stay between its leftovers)
    grown = process.rss()
    del junk
    freed = process.rss()
    trim(0)
    assert grown - before > 40 << 20
    assert freed > grown - (10 << 20)  # freed by Python, still resident...
    assert process.rss() < grown - (40 << 20)  # ...until trimmed
    assert len(kept) == 1000


def test_bursts_back_to_back_cost_one_trim_a_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Large answers one after the other (a client asking for the whole queue in a loop):
    the first trims at once, the rest of the gap's are one trim at its end, not one each."""
    monkeypatch.setattr(process, "rss", lambda: 100 << 20)
    monkeypatch.setattr(process, "TRIM_GAP", 0.05)
    loop = asyncio.new_event_loop()
    trims: list[float] = []
    try:
        t = process.Trimmer(loop)
        t.trim = lambda pad: trims.append(loop.time()) or 1
        for _ in range(20):
            t.after_burst()
        assert len(trims) == 1  # (the first at once; the other 19 put off together)

        async def until_put_off() -> None:
            while len(trims) < 2:
                await asyncio.sleep(0.01)

        loop.run_until_complete(asyncio.wait_for(until_put_off(), 10))
        assert trims[1] - trims[0] >= 0.05 - 1e-3
        t.after_burst()  # (right after the put-off one: within its gap again)
        assert len(trims) == 2
        t.stop()  # (the pending one is cancelled with the trimmer)
        assert t._soon is None
    finally:
        loop.close()
    assert len(trims) == 2
