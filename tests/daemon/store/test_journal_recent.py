"""A launch takes the spec of a job submitted lately from the journal, not from the store."""

from __future__ import annotations

import asyncio

from berth.core.job import Job
from berth.daemon.store import journal as journal_mod
from berth.daemon.store.journal import Journal
from berth.daemon.store.store import open_store
from berth.wire.jobspec import JobSpec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _spec(n: int) -> JobSpec:
    return JobSpec.from_dict({"argv": ["echo", str(n)], "cwd": "/", "env": {}})


def test_committed_specs_are_kept_for_their_launch_then_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_mod, "RECENT", 3)
    store = open_store(str(tmp_path))
    loop = asyncio.new_event_loop()
    try:
        j = Journal(store, loop, lambda *_: None)
        specs = {n: _spec(n) for n in range(1, 6)}
        for n in (1, 2):
            j.add(Job(id=n, submit_time=0.0), specs[n])
        assert j.spec(1) is specs[1]  # not committed yet: the spec it was given
        j.flush()  # (no writer: committed on this thread)
        assert store.spec(1) == specs[1]
        assert j.spec(1) is specs[1]  # committed: kept for its launch...
        assert j.spec(1) is None  # ...which takes it (a later attempt reads the store)
        for n in (3, 4, 5):
            j.add(Job(id=n, submit_time=0.0), specs[n])
        j.flush()
        assert j.spec(2) is None  # the oldest of four went: its launch reads the store
        assert [j.spec(n) for n in (3, 4, 5)] == [specs[3], specs[4], specs[5]]
        assert store.spec(2) == specs[2]
    finally:
        loop.close()
        store.close()
