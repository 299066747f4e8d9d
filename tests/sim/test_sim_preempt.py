"""The simulator applies the preemption rule (issue 32.5, berth.core.preempt): a victim is told
to stop, ends after the grace, rejoins the queue keeping its place and starts again from
nothing (or, with ``checkpoint``, from where it was told to stop); its lost work is counted."""

from __future__ import annotations

import copy
import random

from berth.core.preempt import Rule
from berth.sim import workload
from berth.sim.engine import simulate
from berth.sim.traces import SimJob

H = 3600.0
ONE = workload.inventory("1")


def _long_then_short(requeue: bool) -> list[SimJob]:
    return [
        SimJob(1, 0.0, 10 * H, 1.0, time_limit=10 * H, requeue=requeue),
        SimJob(2, 1000.0, H, 1.0, time_limit=H),
    ]


def test_the_short_job_goes_first_and_the_long_one_runs_again() -> None:
    rule = Rule(min_run=600.0, grace=60.0)
    res = simulate(_long_then_short(True), ONE, policy="guarded", preempt=rule)
    assert res.start[1] == 1060.0  # told to stop at 1000 s, gone after the 60 s grace
    assert res.end[1] == 1060.0 + H
    assert res.start[0] == 1060.0 + H  # again, from the beginning (Slurm's requeue)
    assert res.end[0] == 1060.0 + H + 10 * H
    assert (res.preemptions, res.lost) == (1, 1060.0)


def test_with_a_checkpoint_it_resumes_and_loses_only_the_grace() -> None:
    rule = Rule(min_run=600.0, grace=60.0)
    res = simulate(_long_then_short(True), ONE, policy="guarded", preempt=rule, checkpoint=True)
    assert res.start[0] == 1060.0 + H
    assert res.end[0] == 1060.0 + H + 10 * H - 1000.0  # (1000 s were saved)
    assert (res.preemptions, res.lost, res.saved) == (1, 60.0, {0: 1000.0})


def test_a_job_without_requeue_is_never_touched() -> None:
    res = simulate(_long_then_short(False), ONE, policy="guarded", preempt=Rule(min_run=0.0))
    assert (res.start, res.end) == ([0.0, 10 * H], [10 * H, 11 * H])
    assert res.preemptions == 0


def test_not_before_the_minimum_run_and_once_at_most() -> None:
    jobs = [
        SimJob(1, 0.0, 10 * H, 1.0, time_limit=10 * H, requeue=True),
        SimJob(2, 100.0, H, 1.0, time_limit=H),  # before the long job's minimum run
        SimJob(3, 2 * H, H, 1.0, time_limit=H),  # after its restart: it was preempted once
    ]
    res = simulate(jobs, ONE, policy="sjf", preempt=Rule(min_run=600.0, grace=0.0, cap=1))
    assert res.start[1] == 600.0  # preempted at its minimum run, not at 100 s
    assert res.start[0] == 600.0 + H  # (sjf: job 3 had not come yet)
    assert res.start[2] == 600.0 + 11 * H  # waits: the cap protects the long job
    assert res.preemptions == 1


def test_nobody_opted_in_is_the_same_replay() -> None:
    rng = random.Random(3)
    jobs = []
    t = 0.0
    for i in range(1, 300):
        d = rng.choice((600.0, 3000.0, 40000.0))
        jobs.append(SimJob(i, t, d, float(rng.choice((1, 1, 2))), time_limit=2 * d))
        t += rng.expovariate(1 / 900.0)
    inv = workload.inventory("4")
    plain = simulate(copy.deepcopy(jobs), inv, policy="guarded")
    ruled = simulate(copy.deepcopy(jobs), inv, policy="guarded", preempt=Rule(min_run=0.0))
    assert (ruled.start, ruled.end, ruled.placed) == (plain.start, plain.end, plain.placed)
    for j in jobs:
        j.requeue = True
    opted = simulate(copy.deepcopy(jobs), inv, policy="guarded", preempt=Rule(min_run=0.0))
    assert opted.preemptions > 0 and opted.start != plain.start  # (the workload lets it act)
