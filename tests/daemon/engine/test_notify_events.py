"""The machine's events for the admin's receivers (issue 36.3), told once each after a poll:
the state disk full (starts wait), told again only after it had room; what the receivers are
told is the Outbox's (test_notify_out.py), the daemon's jobs and GPUs test_notify_daemon.py."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from berth.daemon.engine.diskfull import DiskFull
from berth.daemon.engine.notify_events import Announcer

WHY = "cannot write its run file '/state/run/1.1': No space left on device"


class _Box:
    def __init__(self) -> None:
        self.sinks = ("a sink",)
        self.posted: list[dict[str, Any]] = []

    def post(self, message: dict[str, Any]) -> None:
        self.posted.append(message)


def test_a_full_disk_is_told_once_until_it_has_room_again() -> None:
    loop = asyncio.new_event_loop()
    try:
        full = DiskFull(loop, lambda: None)
        engine: Any = SimpleNamespace(
            unfinished=list, clock=SimpleNamespace(time=lambda: 1000.0), diskfull=full,
            res=SimpleNamespace(snapshots=[], by_uuid={}, error=None),
            reservations=SimpleNamespace(entries={}),
        )  # fmt: skip
        box = _Box()
        told = Announcer(engine, box)  # type: ignore[arg-type]
        told.polled()
        assert box.posted == []
        full.stopped_start(1, WHY)
        told.polled()
        told.polled()
        (message,) = box.posted
        assert message["event"] == "disk_full" and message["user"] is None
        assert "the state disk is full" in message["text"] and "No space left" in message["text"]
        full.started()
        told.polled()
        full.stopped_start(2, WHY)
        told.polled()
        assert [m["event"] for m in box.posted] == ["disk_full", "disk_full"]
    finally:
        loop.close()
