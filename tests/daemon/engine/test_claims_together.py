"""A pass's starts claim their GPUs together (berth/claims/together.py): the ledger is looked
at once for all of them, not once a job (issue 35: the claim was ~15 % of the daemon's thread
in a burst of starts), and each claim still stands or withdraws alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from enginekit import EngineRig
from helpers import count_calls

from berth.claims.ledger import Ledger


def test_a_pass_that_starts_four_jobs_looks_at_the_ledger_twice_not_five_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = EngineRig(tmp_path, gpus=4)
    try:
        rig.engine.pauses.queue = True  # (the four submitted before any pass)
        ids = [rig.submit("sleep", "100") for _ in range(4)]
        rig.engine.pauses.queue = False
        looks = count_calls(monkeypatch, Ledger, "_names_locked")
        rig.engine.schedule_pass()
        assert looks.n == 2, looks.n  # the pass's scan, then one check of its four claims
        rig.turn()
        assert [rig.state(i) for i in ids] == ["RUNNING"] * 4
        held = rig.ledger.scan().held()
        assert sorted(h.share for h in held.values()) == [1.0] * 4
    finally:
        rig.close()


def test_a_claim_made_elsewhere_at_the_same_moment_holds_back_only_its_gpus_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process claims GPU 0 between the pass's decision and its claims: the job the
    pass put there withdraws and waits, the other three start; once that claim ends, it
    starts too."""
    rig = EngineRig(tmp_path, gpus=4)
    try:
        rig.engine.pauses.queue = True  # (the four submitted before any pass)
        ids = [rig.submit("sleep", "100") for _ in range(4)]
        rig.engine.pauses.queue = False
        outside: list[Any] = []
        real = Ledger._create

        def racing(self: Ledger, pairs: Any, *a: Any, **k: Any) -> Any:
            if not outside:  # (made as Ledger.claim makes it, checked by nobody)
                gpu = rig.engine.res.by_index[0]
                outside.append(real(Ledger(self.path), [(gpu.uuid, 0)], *a, **k))
            return real(self, pairs, *a, **k)

        monkeypatch.setattr(Ledger, "_create", racing)
        rig.engine.schedule_pass()
        monkeypatch.setattr(Ledger, "_create", real)
        assert len(outside) == 1
        rig.turn()
        states = [rig.state(i) for i in ids]
        assert sorted(states) == ["PENDING", "RUNNING", "RUNNING", "RUNNING"], states
        waiting = ids[states.index("PENDING")]
        outside[0].release()
        rig.engine.kick()
        rig.turn()
        assert rig.state(waiting) == "RUNNING"
        assert rig.engine.jobs[waiting].attempts[-1].gpus == (0,)
    finally:
        rig.close()
