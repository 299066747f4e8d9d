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


def test_shares_of_one_gpu_count_it_once_and_pack_on_it(make_job: MakeJob) -> None:
    """A user at their limit still packs shares onto the GPU they hold part of (it adds no
    GPU), and no further."""
    halves = [make_job(0.5, user="alice") for _ in range(3)]
    d = schedule(Inputs(halves, [], gpus(2), limits=UserLimits({"alice": 1.0})))
    assert len(d.starts) == 2 and {s.gpus for s in d.starts} == {(0,)}
    assert d.pending[halves[2].id].reason is Reason.USER_GPU_LIMIT
    assert d.pending[halves[2].id].detail == (
        "alice holds 1 of 1 GPUs allowed at once, and no room on the GPUs they hold part of"
    )


def test_one_percent_shares_never_block_more_gpus_than_the_limit(make_job: MakeJob) -> None:
    """Issue 41.3 (hostile): with max_gpus = 1, 0.01 on every GPU kept every exclusive job
    of everyone waiting (0.04 "GPUs" held); each GPU a user holds part of counts whole."""
    tiny = [make_job(0.01, user="mallory", gpu_ids=(k,)) for k in range(4)]
    bob = make_job(1, user="bob")
    d = schedule(Inputs([*tiny, bob], [], gpus(4), limits=UserLimits(default=1.0)))
    by_id = {j.id: j for j in [*tiny, bob]}
    assert sorted(by_id[s.job_id].user for s in d.starts) == ["bob", "mallory"]
    for job in tiny[1:]:
        assert d.pending[job.id].reason is Reason.USER_GPU_LIMIT


def test_shares_held_outside_the_queue_count_whole(make_job: MakeJob) -> None:
    """Claims of 0.01 on three GPUs (`berth run`) are three GPUs against the limit: the
    user's exclusive job waits, their share job only packs onto those GPUs."""
    whole, share = make_job(1, user="mallory"), make_job(0.5, user="mallory")
    lim = UserLimits(default=1.0, outside={"mallory": {1, 2, 3}})
    d = schedule(Inputs([whole, share], [], gpus(4), limits=lim))
    assert d.pending[whole.id].detail == "mallory holds 3 of 1 GPUs allowed at once"
    assert [s.gpus[0] in {1, 2, 3} for s in d.starts] == [True]  # (not the free GPU 0)


def test_a_share_is_charged_as_its_whole_gpu(make_job: MakeJob) -> None:
    """In fair share a 0.01 job costs its user a GPU-second a second: it keeps the whole GPU
    from every exclusive job (issue 41.3)."""
    from berth.core.fairshare import INF, Book, fair_charge, usage_at

    tiny = make_job(0.01, user="mallory", t=0.0)
    transition(tiny, State.RUNNING, now=0.0, gpus=(0,), share=0.01)
    assert usage_at(Book(INF), [tiny], now=100.0) == {"mallory": 100.0}
    tiny.time_limit = 10.0
    assert fair_charge(tiny) == 10.0


def test_fair_share_passes_over_a_user_at_the_limit(make_job: MakeJob) -> None:
    mine = make_job(1, user="alice")
    transition(mine, State.RUNNING, now=0.0, gpus=(0,))
    a, b = make_job(1, user="alice"), make_job(1, user="bob")
    fair = FairShare({"alice": 0.0, "bob": 1000.0})  # alice first in line...
    d = schedule(Inputs([a, b], [mine], gpus(4), fair=fair, limits=UserLimits({"alice": 1.0})))
    assert [s.job_id for s in d.starts] == [b.id]  # ... but at her limit


def test_a_user_at_their_limit_costs_the_pass_nothing_per_queued_job(monkeypatch) -> None:
    """Issue 20.10: a user at their GPU limit with a long queue, another user's job behind
    them in fair share's order: the dispatch pass looks at the first job of the full user only,
    not at each of their queued jobs (it looked at all 2,000), and starts the other's job."""
    from berth.core.fairshare import FairShare, interleave
    from berth.core.inventory import uniform
    from berth.core.job import Job, Request
    from berth.core.limits import Held, UserLimits
    from berth.core.policy import Inputs, schedule
    from berth.core.states import State
    from berth.core.transition import transition

    gpus, _ = uniform(4)
    holding = Job(id=99_999, submit_time=0.0, user="a", request=Request(gpus=2))
    transition(holding, State.RUNNING, now=1.0, gpus=(0, 1))
    queued = [Job(id=i + 1, submit_time=2.0 + i, user="a") for i in range(2000)]
    victim = Job(id=5000, submit_time=9000.0, user="b")
    looked: list[int] = []
    real = Held.blocked

    def counting(self: Held, job: Job) -> str | None:
        looked.append(job.id)
        return real(self, job)

    monkeypatch.setattr(Held, "blocked", counting)
    fair = FairShare({"a": 0.0, "b": 1e6}, {"a": 1.0, "b": 1.0})  # a first in line
    d = schedule(Inputs([*queued, victim], [holding], gpus, now=10_000.0, policy="priority",
                        fair=fair, limits=UserLimits(max_gpus={"a": 2.0}), explain=False))  # fmt: skip
    assert [s.job_id for s in d.starts] == [victim.id]
    assert sum(1 for i in looked if i != victim.id) == 1
    done: set[str] = set()
    order = interleave(iter([*queued[:3], victim]), fair, {}, done)
    assert next(order).user == "a"
    done.add("a")
    assert [j.id for j in order] == [victim.id]  # (a's other jobs are not given)
