"""The engine's full-disk state (berth/daemon/engine/diskfull.py) on a real event loop: no
start is tried on every pass while the disk is full, and tries keep coming, further apart, until
one goes through (a try that found nothing to start leaves the next one due)."""

from __future__ import annotations

import asyncio

import pytest

from berth.daemon.engine.diskfull import DiskFull, is_full

WHY = "cannot write its run file '/state/run/1.1': No space left on device"


def test_tries_come_after_pauses_until_a_start_goes_through() -> None:
    loop = asyncio.new_event_loop()
    kicks: list[float] = []
    full = DiskFull(loop, lambda: kicks.append(loop.time()))

    async def kicked(n: int) -> None:
        while len(kicks) < n:
            await asyncio.sleep(0.01)

    try:
        assert not full.blocks()
        full.stopped_start(1, WHY)
        assert full.full and full.disk_full and "StateDiskFull: " + WHY in full.reason()
        assert full.blocks() and full.blocks()  # passes start nothing meanwhile
        loop.run_until_complete(asyncio.wait_for(kicked(1), 10))
        assert not full.blocks()  # the try: a pass that (here) finds nothing to start
        assert full.blocks()
        loop.run_until_complete(asyncio.wait_for(kicked(2), 10))  # the next try comes
        assert kicks[1] - kicks[0] >= 0.9  # (further apart: 0.5 s, then 1 s)
        assert not full.blocks()
        full.started()
        assert not full.full and not full.blocks() and full.note() is None
    finally:
        loop.close()


@pytest.mark.parametrize(
    ("error", "full"),
    [
        (OSError(28, "No space left on device"), True),
        (OSError(122, "Disk quota exceeded"), True),
        ("database or disk is full", True),
        ("database is locked", False),
        (OSError(5, "Input/output error"), False),
    ],
)
def test_what_counts_as_a_full_disk(error: object, full: bool) -> None:
    assert is_full(error) is full  # type: ignore[arg-type]
