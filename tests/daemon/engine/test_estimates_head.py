"""The daemon's start estimates keep an entry for each of the first MOST pending jobs only;
every later pending job reads one shared entry ("unknown: more than MOST jobs ahead"), and a
job that is not pending has none (issue 21: a 100,000-job queue kept an estimate dict, and a
copy of the queue as the estimates' key, per job)."""

from __future__ import annotations

from pathlib import Path

import pytest
from enginekit import EngineRig

from berth.daemon.engine import estimates


def test_only_the_head_has_its_own_estimate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(estimates, "MOST", 3)
    rig = EngineRig(tmp_path, gpus=1)
    try:
        running = rig.submit("sleep", "100", time_limit=100)
        rig.turn()
        assert rig.state(running) == "RUNNING"
        waiting = [rig.submit("sleep", "10", time_limit=60) for _ in range(6)]
        starts = rig.engine.estimates.get()
        heads = [starts.get(j) for j in waiting[:3]]
        assert [h["start"] for h in heads] == [rig.t0 + 100, rig.t0 + 160, rig.t0 + 220]
        far = [starts.get(j) for j in waiting[3:]]
        assert all(f is far[0] for f in far)  # (one shared entry, not one per job)
        assert far[0] == {"start": None, "end": None, "gpus": [], "exact": False,
                          "note": "unknown: more than 3 jobs ahead", "latest": None,
                          "runtime": None, "begin": None, "after": []}  # fmt: skip
        assert starts.get(running) is None and starts.get(99999) is None
        assert rig.engine.estimates.computed == 1
        late = rig.submit("sleep", "10", time_limit=60)  # a new job: estimated again at once
        assert rig.engine.estimates.get().get(late) == far[0]
        assert rig.engine.estimates.computed == 2
    finally:
        rig.close()


@pytest.mark.parametrize("policy", ["guarded", "balanced", "fifo", "sjf"])
def test_the_head_is_taken_from_the_kept_order_not_a_key_per_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    """The estimates' head (issue 35: the first screen of `berth queue` over 100,000 jobs)
    is the first MOST pending jobs of the order the passes keep, not ``nsmallest`` over a
    key made for every pending job; it is the same head."""
    from berth.core import order

    monkeypatch.setattr(estimates, "MOST", 5)
    rig = EngineRig(tmp_path, gpus=1, policy=policy)
    try:
        rig.submit("sleep", "100", time_limit=100)
        rig.turn()
        limits = [300, 60, 600, 60, 120, 900, 30] * 40  # (280 jobs, limits mixed)
        ids = [rig.submit("sleep", "1", time_limit=t, priority=i % 3) for i, t in enumerate(limits)]
        rig.turn()  # (a pass: the order kept)
        keys = 0
        real = order.order_key

        def counted(*args: object, **kwargs: object) -> tuple[float, ...]:
            nonlocal keys
            keys += 1
            return real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(estimates, "order_key", counted, raising=False)
        monkeypatch.setattr(order, "order_key", counted)
        starts = rig.engine.estimates.get()
        assert keys < len(ids)  # (was one a pending job: 280; the replay's own for its 5)
        now = rig.clock.time()
        jobs = [rig.engine.jobs[i] for i in ids]
        head = sorted(jobs, key=lambda j: real(j, policy, now))[:5]
        far = "unknown: more than 5 jobs ahead"
        own = [j for j in ids if starts.get(j)["note"] != far]  # type: ignore[index]
        assert sorted(own) == sorted(j.id for j in head)
    finally:
        rig.close()


def test_a_look_with_nothing_changed_walks_no_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether the estimates are still good is a count the journal keeps of the jobs' changes,
    not a look at every unfinished job (at each screen of `berth queue`: 100,000 of them);
    a change (a hold) is still seen."""
    from helpers import count_calls

    from berth.daemon.engine.engine import Engine

    rig = EngineRig(tmp_path, gpus=1)
    try:
        rig.submit("sleep", "100", time_limit=100)
        rig.turn()
        waiting = [rig.submit("sleep", "10", time_limit=60) for _ in range(50)]
        rig.engine.estimates.get()
        computed = rig.engine.estimates.computed
        walks = count_calls(monkeypatch, Engine, "unfinished")
        rig.clock.t += estimates.MIN_AGE  # (a change now would be estimated again)
        rig.engine.estimates.get()
        assert walks.n == 0 and rig.engine.estimates.computed == computed
        from berth.daemon.engine.front import Front

        rig.loop.run_until_complete(Front(rig.engine).hold([rig.engine.jobs[waiting[0]]], True))
        assert rig.engine.estimates.get().get(waiting[0])["start"] is None  # (held)
        assert rig.engine.estimates.computed == computed + 1
    finally:
        rig.close()
