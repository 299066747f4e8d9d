from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from berth.core import (
    GIB,
    Decisions,
    Gpu,
    Inputs,
    Job,
    Reason,
    State,
    Usage,
    schedule,
    transition,
    uniform,
)
from berth.errors import UsageError

from .conftest import gpus

MakeJob = Callable[..., Job]


def started(d: Decisions) -> dict[int, tuple[int, ...]]:
    return {s.job_id: s.gpus for s in d.starts}


def run(jobs: Sequence[Job], d: Decisions, now: float = 0.0) -> None:
    by_id = {j.id: j for j in jobs}
    for s in d.starts:
        transition(by_id[s.job_id], State.RUNNING, now=now, gpus=s.gpus, share=s.share, mem=s.mem)


def split(jobs: Sequence[Job]) -> tuple[list[Job], list[Job]]:
    return (
        [j for j in jobs if j.state is State.PENDING],
        [j for j in jobs if j.state in (State.RUNNING, State.COMPLETING)],
    )


def test_every_pending_job_has_a_reason(make_job: MakeJob) -> None:
    jobs = [make_job(1) for _ in range(6)] + [make_job(1, held=True)]
    d = schedule(Inputs(jobs, [], gpus(4)))
    assert len(d.starts) == 4
    assert set(d.pending) == {5, 6, 7}
    assert d.pending[7].reason is Reason.HELD
    assert d.pending[5].reason is Reason.RESOURCES
    assert "needs 1 GPU, 0 free" in d.pending[5].detail and "held by job 1" in d.pending[5].detail


def test_priorities_reorder(make_job: MakeJob) -> None:
    low = make_job(1, priority=0)
    high = make_job(1, priority=10)
    d = schedule(Inputs([low, high], [], gpus(1)))
    assert started(d) == {high.id: (0,)}
    assert d.pending[low.id].reason is Reason.RESOURCES


def test_fractional_pair_shares_one_gpu_with_memory_respected(make_job: MakeJob) -> None:
    a = make_job(0.5, mem=30 * GIB)
    b = make_job(0.5, mem=30 * GIB)
    c = make_job(0.5, mem=30 * GIB)
    d = schedule(Inputs([a, b, c], [], gpus(2)))
    assert started(d) == {a.id: (0,), b.id: (0,), c.id: (1,)}
    assert {s.mem for s in d.starts} == {30 * GIB}
    # memory, not share, is the limit: 0.25 x 50G jobs do not fit four to an 80G card
    jobs = [make_job(0.25, mem=50 * GIB) for _ in range(2)]
    d = schedule(Inputs(jobs, [], gpus(1)))
    assert len(d.starts) == 1
    assert d.pending[jobs[1].id].reason is Reason.RESOURCES


def test_fraction_without_mem_is_charged_its_share_of_memory(make_job: MakeJob) -> None:
    j = make_job(0.5)
    d = schedule(Inputs([j], [], gpus(1), others={0: Usage(mem=50 * GIB, busy=True, label="pid 7")}))
    assert d.starts == []  # 0.5 x 80G = 40G > 30G left
    assert "GPU 0 held by pid 7" in d.pending[j.id].detail


def test_allowed_gpus_wait_for_their_gpu(make_job: MakeJob) -> None:
    holder = make_job(1)
    transition(holder, State.RUNNING, now=0.0, gpus=(2,))
    waiter = make_job(1, gpu_ids=(2,))
    other = make_job(1)
    d = schedule(Inputs([waiter, other], [holder], gpus(4)))
    assert started(d) == {other.id: (0,)}
    assert d.pending[waiter.id].reason is Reason.RESOURCES
    assert d.pending[waiter.id].detail == f"waiting for GPU 2 (held by job {holder.id})"


def test_preferred_gpus_are_taken_first(make_job: MakeJob) -> None:
    j = make_job(2, prefer=(3, 1))
    assert started(schedule(Inputs([j], [], gpus(4)))) == {j.id: (1, 3)}
    f = make_job(0.5, prefer=(2,))
    assert started(schedule(Inputs([f], [], gpus(4)))) == {f.id: (2,)}


def test_paused_gpus_get_nothing_new(make_job: MakeJob) -> None:
    a, b = make_job(1), make_job(1, gpu_ids=(1,))
    d = schedule(Inputs([a, b], [], gpus(2), paused={1}))
    assert started(d) == {a.id: (0,)}
    assert d.pending[b.id].reason is Reason.GPU_PAUSED
    assert "GPU 1 paused" in d.pending[b.id].detail
    c = make_job(1)
    d = schedule(Inputs([c], [], gpus(2), paused={0, 1}))
    assert d.pending[c.id].reason is Reason.GPU_PAUSED


def test_outside_usage_counts(make_job: MakeJob) -> None:
    whole, share = make_job(1), make_job(0.5, mem=10 * GIB)
    others = {
        0: Usage(share=1.0, label="claim by alice"),
        1: Usage(mem=20 * GIB, busy=True, label="2 outside processes"),
    }
    d = schedule(Inputs([whole, share], [], gpus(2), others=others))
    # the whole-GPU job cannot go where outside processes run; the share can
    assert started(d) == {share.id: (1,)}
    assert d.pending[whole.id].reason is Reason.RESOURCES
    assert "claim by alice" in d.pending[whole.id].detail


def test_name_filter_and_bad_constraints(make_job: MakeJob) -> None:
    inv = [Gpu(0, "a", "Tesla T4", 16 * GIB), Gpu(1, "b", "NVIDIA A100", 80 * GIB)]
    a = make_job(1, name="a100")
    too_many = make_job(3)
    no_gpu = make_job(1, gpu_ids=(7,))
    too_big = make_job(1, mem=100 * GIB)
    d = schedule(Inputs([a, too_many, no_gpu, too_big], [], inv))
    assert started(d) == {a.id: (1,)}
    for j in (too_many, no_gpu, too_big):
        assert d.pending[j.id].reason is Reason.BAD_CONSTRAINTS
    assert "no GPU 7 here" in d.pending[no_gpu.id].detail
    assert "largest 80.0G" in d.pending[too_big.id].detail


def test_dependencies(make_job: MakeJob) -> None:
    first = make_job(1)
    after_ok = make_job(1, dependencies=_deps("afterok", first.id))
    after_not = make_job(1, dependencies=_deps("afternotok", first.id))
    d = schedule(Inputs([first, after_ok, after_not], [], gpus(4)))
    assert started(d) == {first.id: (0,)}
    assert d.pending[after_ok.id].reason is Reason.DEPENDENCY
    run([first], d)
    transition(first, State.FAILED, now=1.0, exit_code=2)
    d = schedule(Inputs([after_ok, after_not], [], gpus(4), done={first.id: first.state}))
    assert started(d) == {after_not.id: (0,)}
    assert d.pending[after_ok.id].reason is Reason.DEPENDENCY_NEVER
    assert [c.job_id for c in d.cancels] == [after_ok.id]
    assert "ended FAILED" in d.cancels[0].reason


def test_retry_backoff_is_begin_time_and_a_wakeup(make_job: MakeJob) -> None:
    j = make_job(1, retries=1, retry_delay=30.0)
    transition(j, State.RUNNING, now=0.0, gpus=(0,))
    transition(j, State.FAILED, now=10.0, exit_code=1)
    d = schedule(Inputs([j], [], gpus(1), now=20.0))
    assert d.pending[j.id].reason is Reason.BEGIN_TIME and d.wakeup == 40.0
    assert started(schedule(Inputs([j], [], gpus(1), now=40.0))) == {j.id: (0,)}


def test_time_limit_gives_a_wakeup(make_job: MakeJob) -> None:
    j = make_job(1, time_limit=100.0)
    transition(j, State.RUNNING, now=0.0, gpus=(0,))
    assert schedule(Inputs([], [j], gpus(1), now=50.0)).wakeup == 100.0


def test_strict_fifo_blocks_behind_the_head(make_job: MakeJob) -> None:
    r = make_job(1)
    transition(r, State.RUNNING, now=0.0, gpus=(0,))
    big, small = make_job(2), make_job(1)
    d = schedule(Inputs([big, small], [r], gpus(2), policy="fifo"))
    assert d.starts == []
    assert d.pending[small.id].reason is Reason.PRIORITY
    assert f"behind job {big.id}" in d.pending[small.id].detail


def test_easy_backfill_uses_time_limits(make_job: MakeJob) -> None:
    r = make_job(1, time_limit=100.0)
    transition(r, State.RUNNING, now=0.0, gpus=(0,))
    big = make_job(2, time_limit=100.0)
    long = make_job(1, time_limit=500.0)  # would delay the big job: must wait
    short = make_job(1, time_limit=50.0)  # ends at 60 < shadow 100: may backfill
    d = schedule(Inputs([big, long, short], [r], gpus(2), now=10.0, policy="fifo-backfill"))
    assert started(d) == {short.id: (1,)}
    assert d.expected[big.id] == 100.0
    assert d.pending[big.id].reason is Reason.RESOURCES
    assert "expected" not in d.pending[big.id].detail  # (the daemon's estimate says when)
    assert d.pending[long.id].reason is Reason.PRIORITY


def test_without_time_limits_only_gpus_the_head_cannot_use_backfill(make_job: MakeJob) -> None:
    r = make_job(1)
    transition(r, State.RUNNING, now=0.0, gpus=(0,))
    head = make_job(1, gpu_ids=(0,))
    other = make_job(1)
    d = schedule(Inputs([head, other], [r], gpus(2)))
    assert started(d) == {other.id: (1,)}
    head2 = make_job(2, t=0.5)  # the head by queue time (balanced's order at now=0)
    d = schedule(Inputs([head2, other], [r], gpus(2), policy="balanced"))
    assert d.starts == [] and d.pending[other.id].reason is Reason.PRIORITY


def test_sjf_orders_by_time_limit(make_job: MakeJob) -> None:
    long, short, none = make_job(1, time_limit=900.0), make_job(1, time_limit=60.0), make_job(1)
    d = schedule(Inputs([none, long, short], [], gpus(1), policy="sjf"))
    assert started(d) == {short.id: (0,)}


def test_fairshare_alternates_tenants(make_job: MakeJob) -> None:
    jobs = [make_job(1, user="alice") for _ in range(4)] + [make_job(1, user="bob")]
    d = schedule(Inputs(jobs, [], gpus(2), policy="fairshare"))
    users = sorted(next(j.user for j in jobs if j.id == s.job_id) for s in d.starts)
    assert users == ["alice", "bob"]


def test_multi_node_keeps_a_job_on_one_node_unless_it_is_bigger(make_job: MakeJob) -> None:
    inv, nodes = uniform(4, nodes=2)
    one = make_job(1)
    transition(one, State.RUNNING, now=0.0, gpus=(0,))
    three = make_job(3)
    d = schedule(Inputs([three], [one], inv, nodes=nodes))
    # best fit: the node with 3 free GPUs, leaving node01 whole for a 4-GPU job
    assert started(d) == {three.id: (1, 2, 3)} and d.starts[0].node == "node00"
    four = make_job(4)
    assert started(schedule(Inputs([four], [one], inv, nodes=nodes))) == {four.id: (4, 5, 6, 7)}
    eight = make_job(8)
    assert started(schedule(Inputs([eight], [], inv, nodes=nodes))) == {eight.id: tuple(range(8))}


def test_unknown_policy_is_a_usage_error(make_job: MakeJob) -> None:
    with pytest.raises(UsageError, match="unknown policy 'lifo'"):
        schedule(Inputs([make_job(1)], [], gpus(1), policy="lifo"))


def test_schedule_is_pure(make_job: MakeJob) -> None:
    jobs = [make_job(1), make_job(0.5), make_job(2, held=True)]
    before = [j.to_dict() for j in jobs]
    schedule(Inputs(jobs, [], gpus(2)))
    assert [j.to_dict() for j in jobs] == before


def test_one_inputs_record_gives_the_same_decisions_every_time(make_job: MakeJob) -> None:
    """The pass keeps its state on itself, not on the (frozen) inputs."""
    running = make_job(2, time_limit=600.0)
    transition(running, State.RUNNING, now=0.0, gpus=(0, 1))
    jobs = [make_job(4, time_limit=60.0), make_job(1, time_limit=60.0), make_job(1)]
    inputs = Inputs(jobs, [running], gpus(4), now=10.0, policy="fifo-backfill")
    first = schedule(inputs)
    assert first.starts and first.expected
    assert schedule(inputs) == first
    with pytest.raises(AttributeError):
        inputs.now = 20.0  # type: ignore[misc]


def test_unknown_placement_is_a_usage_error(make_job: MakeJob) -> None:
    with pytest.raises(UsageError, match="unknown placement 'worst-fit'"):
        schedule(Inputs([make_job(1)], [], gpus(1), placement="worst-fit"))


def _deps(kind: str, job_id: int) -> tuple[object, ...]:
    from berth.core import Dependency

    return (Dependency(kind, job_id),)


def test_balanced_prefers_short_jobs_but_ages_long_ones(make_job: MakeJob) -> None:
    long = make_job(1, t=0.0, time_limit=86400.0)
    short = make_job(1, t=50.0, time_limit=600.0)
    # at t=100: long waited 100 s (100/294 = 0.34), short 50 s (50/24.5 = 2.0): short first
    d = schedule(Inputs([long, short], [], gpus(1), now=100.0, policy="balanced"))
    assert started(d) == {short.id: (0,)}
    # at t=10000 the long one has waited long enough (34) vs a fresh short job (0.4)
    fresh = make_job(1, t=9990.0, time_limit=600.0)
    d = schedule(Inputs([long, fresh], [], gpus(1), now=10000.0, policy="balanced"))
    assert started(d) == {long.id: (0,)}
    # priority beats urgency
    vip = make_job(1, t=9999.0, time_limit=86400.0, priority=1)
    d = schedule(Inputs([long, fresh, vip], [], gpus(1), now=10000.0, policy="balanced"))
    assert started(d) == {vip.id: (0,)}
