"""Per-user GPU limits in the core (issue 11.3): a job that would take its user above the
limit waits with ``UserGpuLimit`` and a detail in plain words, takes no reservation, and
blocks nobody else."""

from __future__ import annotations

from collections.abc import Callable

from berth.core import Inputs, Job, Reason, State, schedule, transition
from berth.core.fairshare import FairShare
from berth.core.limits import UserLimits

from .conftest import gpus

MakeJob = Callable[..., Job]


def test_a_user_at_the_limit_waits_with_a_plain_reason(make_job: MakeJob) -> None:
    held = [make_job(1, user="alice") for _ in range(4)]
    for k, job in enumerate(held):
        transition(job, State.RUNNING, now=0.0, gpus=(k,))
    more = make_job(1, user="alice")
    d = schedule(Inputs([more], held, gpus(8), limits=UserLimits({"alice": 4.0})))
    assert d.starts == []
    assert d.pending[more.id].reason is Reason.USER_GPU_LIMIT
    assert d.pending[more.id].detail == "alice holds 4 of 4 GPUs allowed at once"
    assert str(d.pending[more.id]) == "(UserGpuLimit) alice holds 4 of 4 GPUs allowed at once"


def test_the_limit_counts_jobs_started_in_the_same_pass(make_job: MakeJob) -> None:
    jobs = [make_job(1, user="alice") for _ in range(5)] + [make_job(2, user="bob")]
    d = schedule(Inputs(jobs, [], gpus(8), limits=UserLimits(default=3.0)))
    by_id = {j.id: j for j in jobs}
    users = [by_id[s.job_id].user for s in d.starts]
    assert users.count("alice") == 3 and users.count("bob") == 1
    assert d.pending[jobs[3].id].detail == "alice holds 3 of 3 GPUs allowed at once"


def test_a_limited_job_reserves_nothing_and_blocks_nobody(make_job: MakeJob) -> None:
    mine = make_job(1, user="alice")
    transition(mine, State.RUNNING, now=0.0, gpus=(0,))
    big = make_job(2, user="alice", priority=10)  # first in line, but alice may hold 2
    small = make_job(1, user="bob")
    d = schedule(Inputs([big, small], [mine], gpus(2), limits=UserLimits({"alice": 2.0})))
    assert [s.job_id for s in d.starts] == [small.id]  # bob is not held behind alice
    assert d.pending[big.id].reason is Reason.USER_GPU_LIMIT
    assert big.id not in d.expected  # no reservation


def test_a_per_user_setting_beats_the_default_and_none_means_no_limit(make_job: MakeJob) -> None:
    jobs = [make_job(1, user=u) for u in ("alice", "alice", "bob", "bob", "carol", "carol")]
    lim = UserLimits({"alice": None, "bob": 1.0}, default=0.5)
    d = schedule(Inputs(jobs, [], gpus(8), limits=lim))
    by_id = {j.id: j for j in jobs}
    assert sorted(by_id[s.job_id].user for s in d.starts) == ["alice", "alice", "bob"]
    carol = jobs[4]
    assert d.pending[carol.id].detail == "needs 1 GPUs, more than carol may hold at once (0.5)"


def test_fractions_count_as_what_they_hold(make_job: MakeJob) -> None:
    halves = [make_job(0.5, user="alice") for _ in range(3)]
    d = schedule(Inputs(halves, [], gpus(2), limits=UserLimits({"alice": 1.0})))
    assert len(d.starts) == 2
    assert d.pending[halves[2].id].detail == "alice holds 1 of 1 GPUs allowed at once"


def test_fair_share_passes_over_a_user_at_the_limit(make_job: MakeJob) -> None:
    mine = make_job(1, user="alice")
    transition(mine, State.RUNNING, now=0.0, gpus=(0,))
    a, b = make_job(1, user="alice"), make_job(1, user="bob")
    fair = FairShare({"alice": 0.0, "bob": 1000.0})  # alice first in line...
    d = schedule(Inputs([a, b], [mine], gpus(4), fair=fair, limits=UserLimits({"alice": 1.0})))
    assert [s.job_id for s in d.starts] == [b.id]  # ... but at her limit
