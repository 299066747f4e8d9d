"""Backfill's shortcuts decide as the slow way where they matter most (issue 10, point 7).

Once a pass holds a reservation, a job is passed over without a placement attempt when it
fits neither outside the reservation nor -- ending before the shadow time -- in all that is
free, and balanced's walk leaves such jobs out of its merge. This workload is made of what
tests that: many short jobs bigger than what is usually free (2 to 16 GPUs on 2 nodes of 8),
a stream of 1-GPU jobs, exact time limits (so many jobs end before the shadow), load above 1.
Every start time and GPU must equal a replay that explains every pass on a fresh capacity
(``reference`` of test_sim_decisions).
"""

from __future__ import annotations

import copy
import random

import pytest

from berth.sim import workload
from berth.sim.engine import simulate
from berth.sim.traces import SimJob
from tests.sim.test_sim_decisions import reference


def _short_and_big(n: int, seed: int) -> list[SimJob]:
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(1, n + 1):
        g = rng.choice((1, 1, 1, 1, 2, 4, 4, 6, 8, 12, 16))
        d = rng.choice((rng.uniform(10, 300), rng.expovariate(1 / 4000.0) + 1))
        out.append(SimJob(i, t, d, float(g), f"t{i % 2}"))
        t += rng.expovariate(1 / 200.0)
    return workload.time_limits(out, "exact")


@pytest.mark.parametrize("policy", ["balanced", "fifo-backfill", "sjf"])
def test_short_big_jobs_are_passed_over_exactly_as_the_slow_way_decides(policy: str) -> None:
    jobs = _short_and_big(350, seed=3)
    inv = workload.inventory("2x8")
    res = simulate(copy.deepcopy(jobs), inv, policy=policy, placement="packer")
    start, placed = reference(copy.deepcopy(jobs), inv, policy, "packer")
    assert res.start == start
    assert res.placed == placed
