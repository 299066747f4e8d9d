"""`berth simulate --fairshare`: fair share between tenants by decayed usage in the
simulator (the core's, as the system daemon uses it) and the per-tenant report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from berth.cli.main import main
from berth.sim.engine import simulate
from berth.sim.metrics import metrics
from berth.sim.traces import SimJob
from berth.sim.workload import inventory

DATA = Path(__file__).parent / "data"


def _flood() -> list[SimJob]:
    """Tenant a floods 8 GPUs with 200 one-GPU jobs of an hour at t = 0; b, the same, an
    hour later."""
    jobs = [SimJob(k + 1, float(k), 3600.0, 1, "a", time_limit=3600.0) for k in range(200)]
    jobs += [SimJob(201 + k, 3600.0 + k, 3600.0, 1, "b", time_limit=3600.0) for k in range(200)]
    return sorted(jobs, key=lambda j: j.submit)


def test_fair_share_serves_a_late_tenant_while_it_waits() -> None:
    runs = {}
    for fair in (False, True):
        res = simulate(_flood(), inventory("8"), policy="fifo-backfill", fairshare=fair)
        first_b = min(s for s, j in zip(res.start, res.jobs, strict=True) if j.tenant == "b")
        runs[fair] = (metrics(res), first_b - 3600.0)
    (plain, plain_wait), (fair, fair_wait) = runs[False], runs[True]
    assert fair["policy"] == "fifo-backfill+fairshare" and fair["fairshare"] is True
    # without: b waits until a's 200 jobs have all started; with: b's first job starts as
    # soon as a GPU frees (a has used more), and b gets its share from then on
    assert plain_wait > 20 * 3600 and fair_wait < 60
    # b's service while it waited: two thirds of its fair share without, all of it with
    assert plain["tenants"]["b"]["service"] < 0.7 and fair["tenants"]["b"]["service"] > 0.99
    assert plain["jain_service"] < 0.85 and fair["jain_service"] > 0.99
    # the same work is done: only who waits changes
    assert fair["utilisation"] == pytest.approx(plain["utilisation"], rel=0.01)


def test_one_tenant_runs_as_without(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", str(DATA / "itp_cluster10.csv"), "--inventory", "8",
                 "--load", "0.9", "--fairshare", "both", "--json"])  # fmt: skip
    assert code == 0
    plain, fair = json.loads(capsys.readouterr().out)["runs"]
    assert plain["policy"] == "guarded" and fair["policy"] == "guarded+fairshare"  # the default
    for key in ("jct_mean", "wait_max", "utilisation"):
        assert fair[key] == plain[key]


def test_cli_prints_each_tenant(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", str(DATA / "philly_head300.csv"), "--inventory", "2x4",
                 "--fairshare", "both", "--policy", "fifo-backfill"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "jain svc" in out.splitlines()[0]
    assert "fifo-backfill+fairshare" in out and "wait mean h" in out and "service" in out
    assert main(["simulate", str(DATA / "philly_head300.csv"), "--half-life", "0"]) == 2
    assert "--half-life '0': must be positive" in capsys.readouterr().err


def test_projects_share_first_then_their_users() -> None:
    """Project vision's four users and project nlp's one user flood 8 GPUs at once: with
    projects (berth's records carry them), the projects get the same GPU-hours while both
    wait; without, each of the five users gets a fifth, so vision about four times nlp's
    (less in the first hour, when the GPUs went to the first arrivals)."""

    def flood(projects: bool) -> list[SimJob]:
        jobs = []
        for k in range(200):
            user = f"v{(k // 2) % 4}" if k % 2 else "n0"
            project = ("vision" if k % 2 else "nlp") if projects else ""
            jobs.append(SimJob(k + 1, float(k), 3600.0, 1, user, time_limit=3600.0,
                               project=project))  # fmt: skip
        return jobs

    def hours(projects: bool) -> dict[str, float]:
        res = simulate(flood(projects), inventory("8"), policy="fifo-backfill", fairshare=True)
        busy = 10 * 3600.0  # (both still wait then: 100 jobs each, 8 GPUs)
        out: dict[str, float] = {}
        for s, j in zip(res.start, res.jobs, strict=True):
            if s < busy:
                side = "nlp" if j.tenant == "n0" else "vision"
                out[side] = out.get(side, 0.0) + j.gpus * (min(s + j.duration, busy) - s)
        return out

    two = hours(True)
    assert two["vision"] == pytest.approx(two["nlp"], rel=0.1)
    flat = hours(False)
    assert flat["vision"] > 2.5 * flat["nlp"]  # (a fifth each after the first hour: 4x)
