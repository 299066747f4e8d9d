"""Cancelling many pending jobs is one bulk operation (issue 35): the queue order drops them
in one go, the store takes them in one statement (no row made and saved per job), and what
is stored, shown and told is what a cancel of each job one by one gives. Counted, not timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from enginekit import EngineRig

from berth.core.ranking import Ranking
from berth.daemon.engine.front import Front
from berth.daemon.requests import jobs
from berth.daemon.store.store import Store

N = 3000


def _held_array(rig: EngineRig, n: int) -> list[int]:
    from berth.daemon.engine.admission import admit

    spec = {"argv": ["true"], "env": {"PATH": "/bin"}, "cwd": str(rig.tmp),
            "array": f"0-{n - 1}", "hold": True}  # fmt: skip
    reply = rig.loop.run_until_complete(admit.submit(rig.engine, rig.peer, spec))
    first = int(reply["job_id"])
    return list(range(first, first + n))


class Counts:
    """Rows made to be saved one by one, and jobs pruned from the ranking one by one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rows = 0
        self.pruned = 0
        save_row, prune = Store.save_row, Ranking.prune

        def counted_row(*a: Any) -> tuple[Any, ...]:
            self.rows += 1
            return save_row(*a)

        def counted_prune(me: Ranking, gone: Any) -> None:
            gone = list(gone)
            self.pruned += len(gone)
            prune(me, gone)

        monkeypatch.setattr(Store, "save_row", staticmethod(counted_row))
        monkeypatch.setattr(Ranking, "prune", counted_prune)


def test_cancelling_many_pending_jobs_saves_no_row_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = EngineRig(tmp_path, gpus=1)
    try:
        busy = rig.submit("sleep", "60", gpus=1)
        rig.turn()  # (it runs; the ranking holds the pending array)
        ids = _held_array(rig, N)
        rig.turn()
        counts = Counts(monkeypatch)
        done = jobs.cancel(Front(rig.engine), rig.peer, {"all_mine": True})["cancelled"]
        assert len(done) == N + 1 and done[str(busy)] == "terminating"
        assert sum(1 for what in done.values() if what == "cancelled") == N
        rig.loop.run_until_complete(rig.engine.drain())
        assert counts.rows <= 1  # (the running job's COMPLETING; was one a pending job)
        assert counts.pruned == 0  # the ranking rebuilt from the jobs left, not pruned each
        rig.turn()
        assert counts.rows <= 2 and counts.pruned == 0
        assert not rig.engine.settling  # every end durable: told to the journal's observers
        for i in (ids[0], ids[N // 2], ids[-1]):
            row = rig.store.job(i)
            assert row is not None and row["state"] == "CANCELLED"
            assert row["history"][-1]["detail"] == "cancelled before it started"
            assert row["history"][-1]["prev"] == "PENDING"
        ended = rig.store.db.execute(
            "SELECT COUNT(*) FROM jobs WHERE state = 'CANCELLED' AND ended_at = ? AND id >= ?",
            (rig.t0, ids[0]),
        ).fetchone()[0]
        assert ended == N  # (the purge finds them by ended_at)
    finally:
        rig.close()


def test_a_bulk_cancel_stores_what_one_cancel_at_a_time_stores(tmp_path: Path) -> None:
    """The row a bulk cancel leaves is the job as a cancel of it alone saves it: its whole
    record, the first estimate stamped in memory included."""
    rig = EngineRig(tmp_path, gpus=1)
    try:
        rig.submit("sleep", "60", gpus=1)
        rig.turn()
        ids = _held_array(rig, 20)
        rig.turn()
        job = rig.engine.jobs[ids[3]]
        job.note("estimated", [rig.t0, None, None, False])  # (as estimates.py stamps it)
        front = Front(rig.engine)
        front.cancel([rig.engine.jobs[i] for i in ids], None)
        rig.loop.run_until_complete(rig.engine.drain())
        for i in ids:
            stored = rig.store.job(i)
            assert stored is not None
            assert stored == _json(rig.engine.find(i).to_dict()), i  # type: ignore[union-attr]
    finally:
        rig.close()


def test_a_job_saved_and_cancelled_in_one_turn_is_stored_cancelled(tmp_path: Path) -> None:
    """A job whose row waits to be written (changed this turn: `berth update`, a release)
    is cancelled in that row (made as the job is at the commit), its end time set: not
    missed by the statement, not cancelled twice."""
    rig = EngineRig(tmp_path, gpus=1)
    try:
        ids = _held_array(rig, 3)
        rig.turn()
        changed = rig.engine.jobs[ids[1]]
        rig.engine.save(changed)  # (queued for the next commit)
        assert rig.engine.journal.queued(changed.id)
        Front(rig.engine).cancel([rig.engine.jobs[i] for i in ids], None)
        rig.loop.run_until_complete(rig.engine.drain())
        for i in ids:
            state, ended_at, data = rig.store.db.execute(
                "SELECT state, ended_at, data FROM jobs WHERE id = ?", (i,)
            ).fetchone()
            assert (state, ended_at) == ("CANCELLED", rig.t0)
            assert data.count("cancelled before it started") == 1
    finally:
        rig.close()


def _json(d: dict[str, Any]) -> Any:
    import json

    return json.loads(json.dumps(d))
