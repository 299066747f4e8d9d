"""`berth simulate --idle-reclaim` (issue 25): what releasing idle holders would save, an
estimate from a model (a share of jobs holds its GPUs idle after its work), replayed by the
scheduler without and with reclaim."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from berth.cli.main import main
from berth.sim import workload
from berth.sim.idle import estimate
from berth.sim.traces import SimJob

DATA = Path(__file__).parent / "data"
H = 3600.0


def test_reclaim_frees_the_gpu_for_the_job_that_waits_behind_an_idle_holder() -> None:
    # One GPU: A works 1 h then (idle share 1) holds it idle 4 h; B arrives at once.
    jobs = [SimJob(1, 0.0, 1 * H, 1), SimJob(2, 1.0, 1 * H, 1)]
    out = estimate(
        jobs, workload.inventory("1"), reclaim=2 * H, idle_share=1.0, idle_tail=4 * H
    )
    assert out["estimate"] is True and out["model"]["idle_jobs"] == 2
    without, with_, saved = out["without_reclaim"], out["with_reclaim"], out["saved"]
    assert without["idle_gpu_hours"] == 8.0 and with_["idle_gpu_hours"] == 4.0
    # B waited for A's work and its idle tail: 5 h without reclaim, 3 h with (mean over 2).
    assert without["wait_mean"] == pytest.approx((5 * H - 1) / 2)
    assert with_["wait_mean"] == pytest.approx((3 * H - 1) / 2)
    assert saved["wait_mean"] == pytest.approx(1 * H)
    assert saved["makespan"] == pytest.approx(4 * H)
    # Nobody idle: nothing to save.
    none = estimate(jobs, workload.inventory("1"), reclaim=2 * H, idle_share=0.0, idle_tail=4 * H)
    assert all(v == 0 for v in none["saved"].values())


def test_the_cli_reports_the_estimate_as_such(capsys: pytest.CaptureFixture[str]) -> None:
    trace = str(DATA / "philly_head300.csv")
    args = ["simulate", trace, "--inventory", "8", "--idle-reclaim", "2h"]
    assert main([*args, "--idle-share", "0.3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["estimate"] is True and out["model"]["idle_share"] == 0.3
    assert out["saved"]["idle_gpu_hours"] > 0 and out["saved"]["wait_mean"] > 0
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "an estimate, not a measurement" in text and "--idle-reclaim 2:00:00" in text
    assert main([*args, "--idle-share", "1.5"]) == 2
