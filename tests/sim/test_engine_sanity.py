"""Checks that would catch a broken simulator (issue 5's acceptance)."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest

from berth.core.policy import POLICIES
from berth.sim import traces, workload
from berth.sim.engine import simulate
from berth.sim.metrics import jain, metrics, pct
from berth.sim.traces import SimJob

DATA = Path(__file__).parent / "data"


def synthetic(
    n: int, gpus: int, rho: float, seed: int, sizes: tuple[float, ...] = (1,)
) -> list[SimJob]:
    rng = random.Random(seed)
    jobs = []
    for i in range(1, n + 1):
        g = sizes[rng.randrange(len(sizes))]
        jobs.append(SimJob(i, 0.0, rng.expovariate(1 / 3600.0) + 1, float(g), f"t{i % 3}"))
    mean_work = sum(j.gpu_seconds for j in jobs) / n
    t = 0.0
    for j in jobs:
        j.submit = t
        t += rng.expovariate(rho * gpus / mean_work)
    return workload.time_limits(jobs, "exact")


def test_no_contention_jct_equals_duration() -> None:
    # one job per GPU at a time: 8 GPUs, jobs arrive 1000 s apart and last < 8000 s
    rng = random.Random(1)
    jobs = [SimJob(i, i * 1000.0, rng.uniform(1, 7999), 1.0) for i in range(1, 200)]
    for policy in POLICIES:
        res = simulate(copy.deepcopy(jobs), workload.inventory("8"), policy=policy)
        for i, j in enumerate(res.jobs):
            assert res.start[i] == j.submit
            assert res.end[i] - j.submit == pytest.approx(j.duration)


def test_sjf_beats_fifo_at_high_load() -> None:
    jobs = synthetic(3000, 8, 1.2, seed=7, sizes=(1, 1, 1, 2, 4))
    inv = workload.inventory("8")
    fifo = metrics(simulate(copy.deepcopy(jobs), inv, policy="fifo"))
    sjf = metrics(simulate(copy.deepcopy(jobs), inv, policy="sjf"))
    balanced = metrics(simulate(copy.deepcopy(jobs), inv, policy="balanced"))
    assert sjf["jct_mean"] < 0.6 * fifo["jct_mean"]
    assert balanced["jct_mean"] < 0.7 * fifo["jct_mean"]
    assert balanced["wait_max"] < sjf["wait_max"]  # aging bounds the longest wait


@pytest.mark.parametrize("policy", POLICIES)
def test_utilisation_at_most_one_and_every_job_finishes_once(policy: str) -> None:
    jobs = synthetic(1500, 8, 1.1, seed=3, sizes=(1, 2, 0.5, 0.25, 8))
    res = simulate(jobs, workload.inventory("2x4"), policy=policy)
    m = metrics(res)
    assert 0 < m["utilisation"] <= 1.0
    assert m["jobs"] == len(jobs)
    for i, j in enumerate(res.jobs):
        assert j.submit <= res.start[i] < res.end[i]
    # allocation never exceeds capacity at any instant
    assert max(p[2] for p in res.timeline) <= res.capacity + 1e-9


def test_same_seed_same_numbers() -> None:
    def one(seed: int) -> dict[str, object]:
        jobs = traces.read(str(DATA / "itp_cluster10.csv"))
        jobs = [j for j in jobs if j.gpus <= 8]
        jobs = workload.scale_to(jobs, 8, 0.5, "thin", seed=seed)
        workload.time_limits(jobs, "round")
        m = metrics(simulate(jobs, workload.inventory("8"), policy="balanced"))
        m.pop("wall_s")
        return m

    assert one(5) == one(5)
    assert one(5) != one(6)


def test_fractional_jobs_pair_up() -> None:
    jobs = [SimJob(i, 0.0, 100.0, 0.5) for i in range(1, 5)]
    res = simulate(jobs, workload.inventory("1"))
    assert sorted(res.start) == [0.0, 0.0, 100.0, 100.0]
    m = metrics(res)
    assert m["utilisation"] == pytest.approx(1.0)


def test_time_limit_shorter_than_duration_times_out() -> None:
    jobs = [SimJob(1, 0.0, 100.0, 1.0, time_limit=40.0)]
    res = simulate(jobs, workload.inventory("1"))
    assert res.end == [40.0] and res.timeouts == 1


def test_too_big_jobs_are_refused() -> None:
    from berth.errors import UsageError

    with pytest.raises(UsageError, match="needs 16 GPUs but the inventory has 8"):
        simulate([SimJob(1, 0.0, 1.0, 16.0)], workload.inventory("8"))


def test_percentiles_and_jain() -> None:
    assert pct([1, 2, 3, 4], 50) == 2 and pct([1, 2, 3, 4], 99) == 4
    assert jain([1, 1, 1]) == pytest.approx(1.0)
    assert jain([1, 0, 0, 0]) == pytest.approx(0.25)
