"""Issue 33.1-2: every pending job gets a start estimate from the one estimator, from time
limits where given and from run times learned from the daemon's finished jobs; "unknown" only
where a job ahead has neither (the 2-GPU case of the issue: before, one running job without a
limit made every estimate "unknown", even on the other GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from enginekit import EngineRig

from berth.cli.queue_starts import text
from berth.core.job import Job
from berth.daemon.engine import history, queue_view


def _est(rig: EngineRig, job: int) -> dict[str, Any]:
    est = rig.engine.estimates.get().get(job)
    assert est is not None
    return est


def _gpu(rig: EngineRig, job: int) -> int:
    live = rig.engine.live(job)
    assert live is not None and live.attempt is not None
    return live.attempt.gpus[0]


def test_a_limit_on_one_gpu_tells_even_beside_a_job_without_one(tmp_path: Path) -> None:
    rig = EngineRig(tmp_path, gpus=2)
    try:
        x = rig.submit("sleep", "3000", time_limit=600.0)
        y = rig.submit("sleep", "9000")  # no limit, nothing learned
        rig.turn()
        assert rig.state(x) == rig.state(y) == "RUNNING"
        r = rig.submit("sleep", "10", time_limit=60.0, gpu_ids=[_gpu(rig, x)])
        est = _est(rig, r)
        assert est["start"] == rig.t0 + 600.0 and est["exact"], est
        assert est["gpus"] == [_gpu(rig, x)]
        assert text(est, rig.t0).startswith("in <= 10:00 (at ")
        # A job that needs both GPUs waits for the one nobody can tell: unknown, saying why.
        both = rig.submit("sleep", "10", time_limit=60.0, gpus=2)
        est = _est(rig, both)
        assert est["start"] is None and not est["exact"]
        assert est["note"].startswith("unknown: a job ahead has no time limit")
        assert f"job {y}" in est["note"]
    finally:
        rig.close()


def test_a_dependency_on_a_limited_job_waits_for_its_limit_not_for_an_unlimited_share(
    tmp_path: Path,
) -> None:
    rig = EngineRig(tmp_path, gpus=3)
    try:
        a = rig.submit("sleep", "9000", time_limit=7200.0)
        s = rig.submit("sleep", "9000", gpus=0.5)  # a share job without a limit
        rig.turn()
        assert rig.state(a) == rig.state(s) == "RUNNING"
        d = rig.submit("sleep", "10", dependency=f"afterok:{a}")
        est = _est(rig, d)
        assert est["start"] == rig.t0 + 7200.0 and est["exact"], est
        assert est["after"] == [a]
        assert text(est, rig.t0).startswith(f"after job {a}, in <= 2:00:00")
        b = rig.submit("sleep", "10", begin=rig.t0 + 3600.0)
        est = _est(rig, b)
        assert est["start"] == rig.t0 + 3600.0 and est["begin"] == rig.t0 + 3600.0
        assert text(est, rig.t0).startswith("not before ")
    finally:
        rig.close()


def _learn(rig: EngineRig, seconds: list[int], name: str = "train.sh") -> None:
    for n in seconds:
        job = rig.submit("sleep", str(n), name=name)
        rig.turn()
        rig.advance_to(rig.clock.t + n)
        assert rig.state(job) == "COMPLETED"


def test_run_times_learned_from_finished_jobs_give_an_estimate_with_a_range(
    tmp_path: Path,
) -> None:
    rig = EngineRig(tmp_path, gpus=1)
    try:
        _learn(rig, [120, 130, 140, 150, 300])
        y = rig.submit("sleep", "5000", name="train.sh")  # no limit: its runs tell
        rig.turn()
        began = rig.clock.t
        r = rig.submit("sleep", "10", name="eval")
        est = _est(rig, r)
        assert est["start"] == began + 140.0 and not est["exact"], est  # the median
        assert est["latest"] == began + 300.0  # the 90th percentile
        said = text(est, began)
        assert said.startswith("in ~2:20 (at ") and said.endswith(", p90 5:00)"), said
        mine = rig.submit("sleep", "10", name="train.sh")
        own = _est(rig, mine)["runtime"]
        assert own["text"] == "typical 2:20, p90 5:00, from 5 runs of train.sh"
        # A prediction never ends a job: one that outruns it runs on and is re-predicted.
        rig.advance_to(began + 1000.0)
        assert rig.state(y) == "RUNNING"
        est = _est(rig, r)
        assert est["start"] == began + 2000.0, est  # twice what it ran so far
    finally:
        rig.close()


def test_the_limit_caps_a_prediction(tmp_path: Path) -> None:
    rig = EngineRig(tmp_path, gpus=1)
    try:
        _learn(rig, [1000, 1000])
        x = rig.submit("sleep", "5000", name="train.sh", time_limit=300.0)
        rig.turn()
        assert rig.state(x) == "RUNNING"
        r = rig.submit("sleep", "10", name="train.sh")
        est = _est(rig, r)
        assert est["start"] == rig.clock.t + 300.0, est
        assert est["runtime"]["typical"] == 1000.0
    finally:
        rig.close()


def test_the_history_is_read_once_from_the_store(tmp_path: Path) -> None:
    rig = EngineRig(tmp_path, gpus=1)
    try:
        _learn(rig, [60, 90, 120])
        rig.loop.run_until_complete(rig.engine.drain())
        rows = list(history.finished(rig.store))
        runs = [r.run() for r in rows]
        assert [r.seconds for r in runs if r is not None] == [60.0, 90.0, 120.0]
        assert {r.name for r in rows} == {"train.sh"}
        assert rig.engine.estimates.runtimes.added == 3  # (each learned once, read or ended)
    finally:
        rig.close()


def test_each_first_estimate_is_kept_and_compared_with_the_real_start(tmp_path: Path) -> None:
    """Issue 33.5: the estimate made when a job is first estimated is stored with the job; once
    it ended, the last week's errors are summed up (the queue's head, the page's line), and
    read back from the store when the daemon starts again."""
    from berth.daemon.engine.estimates import Estimates

    rig = EngineRig(tmp_path, gpus=1)
    try:
        x = rig.submit("sleep", "300", time_limit=600.0)
        rig.turn()
        r = rig.submit("sleep", "100", time_limit=200.0)
        assert _est(rig, r)["start"] == rig.t0 + 600.0
        rig.advance_to(rig.t0 + 1000.0)
        assert rig.state(x) == rig.state(r) == "COMPLETED"
        assert rig.job(r).extra["estimated"] == [rig.t0, rig.t0 + 600.0, rig.t0 + 600.0, True]
        summary = rig.engine.estimates.accuracy.summary(rig.clock.t)
        assert summary == {"days": 7.0, "jobs": 1, "unknown": 0, "median": 300.0,
                           "p90": 300.0, "within": 1.0}  # fmt: skip
        head = next(queue_view.frames(rig.engine, _All(), lambda job: True))
        assert head["estimates"] == summary
        rig.loop.run_until_complete(rig.engine.drain())
        again = Estimates(rig.engine)
        assert again.runtimes.added == 2  # (x and r, from the store)
        assert again.accuracy.summary(rig.clock.t) == summary
        assert again.accuracy.summary(rig.clock.t + 8 * 86400.0)["jobs"] == 0  # (a week)
    finally:
        rig.close()


class _All:
    """A `queue` request for every job."""

    uid = limit = None
    fold = model = finished = False

    def wants(self, job: Job) -> bool:
        return True


@pytest.mark.parametrize("predict", [False, True])
def test_predict_backfills_by_learned_run_times_and_kills_nothing(
    tmp_path: Path, predict: bool
) -> None:
    """Issue 33.4: with `[scheduling] predict = true` a job without a limit whose learned run
    time ends before the blocked job's predicted start backfills; without it, it waits. A job
    that outruns its prediction runs on."""
    rig = EngineRig(tmp_path, gpus=2)
    rig.engine.res.cfg.predict = predict
    try:
        _learn(rig, [50, 50], name="short")
        _learn(rig, [1000, 1000], name="long")
        long_ = rig.submit("sleep", "5000", name="long")
        rig.turn()
        head = rig.submit("sleep", "10", gpus=2, time_limit=60.0)
        short = rig.submit("sleep", "50", name="short")
        rig.turn()
        assert rig.state(head) == "PENDING"
        assert rig.state(short) == ("RUNNING" if predict else "PENDING")
        rig.advance_to(rig.clock.t + 3000.0)  # (past the long job's 1000 s)
        assert rig.state(long_) == "RUNNING"
    finally:
        rig.close()


def test_an_interpreters_script_is_what_its_runs_teach(tmp_path: Path) -> None:
    """`python3 train.py` is named python3; its runs are learned as train.py's, read back from
    the store as such, and a `--name` keeps its own name."""
    rig = EngineRig(tmp_path, gpus=1)
    try:
        jobs = [rig.submit("python3", "train.py", "--lr", "1") for _ in range(2)]
        named = rig.submit("python3", "train.py", name="mine")
        for _ in range(3):  # (each runs 0 s in fake time)
            rig.turn()
            rig.advance_to(rig.clock.t + 1.0)
        assert [rig.state(j) for j in [*jobs, named]] == ["COMPLETED"] * 3
        assert rig.job(jobs[0]).name == "python3"
        assert rig.job(jobs[0]).extra["script"] == "train.py"
        assert "script" not in rig.job(named).extra
        rig.loop.run_until_complete(rig.engine.drain())
        assert [r.name for r in history.finished(rig.store)] == ["train.py", "train.py", "mine"]
        nxt = rig.job(jobs[0])  # (a job of the same script)
        rt = rig.engine.estimates.predicted(nxt)
        assert rt is not None and (rt.basis, rt.runs) == ("train.py", 2)
    finally:
        rig.close()
