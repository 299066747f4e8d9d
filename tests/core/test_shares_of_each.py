"""A share of each of several GPUs (issue 27, point 1): ``Request(gpus=2, each=0.1)`` holds 0.1
of two GPUs, as mgpu_srun's ``--gpu-ids 0,1 --mem 8000`` asked for 8000 MiB on each GPU. The
pure core places it (every placement), fits it next to other shares, charges it (the pass and
the simulator's :class:`Occupancy` alike), explains why it waits, and stores it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from berth.core import GIB, Inputs, Job, Reason, Request, State, schedule, transition
from berth.core.capacity import Capacity
from berth.core.occupancy import Occupancy
from berth.core.placement import PLACEMENTS, Profile, could_fit, place
from berth.errors import UsageError

from .conftest import gpus

MakeJob = Callable[..., Job]
MIB = 1 << 20


def _job(i: int, n: int, each: float, mem: int | None = None, **kw: object) -> Job:
    req = Request(gpus=n, each=each, mem=mem, **kw)  # type: ignore[arg-type]
    return Job(id=i, submit_time=float(i), request=req)


def _run(jobs: list[Job], now: float = 0.0) -> dict[int, tuple[int, ...]]:
    pending = [j for j in jobs if j.state is State.PENDING]
    running = [j for j in jobs if j.state is State.RUNNING]
    d = schedule(Inputs(pending, running, gpus(4), now=now))
    by_id = {j.id: j for j in jobs}
    for s in d.starts:
        transition(by_id[s.job_id], State.RUNNING, now=now, gpus=s.gpus, share=s.share, mem=s.mem)
    return {s.job_id: s.gpus for s in d.starts}


def test_the_request_model() -> None:
    r = Request(gpus=2, each=0.1, mem=8000 * MIB, gpu_ids=(0, 1))
    assert (r.count, r.share, r.whole, r.shares) == (2, 0.1, False, True)
    assert r.gpu_amount == pytest.approx(0.2) and r.size == 0.1
    assert Request.from_dict(r.to_dict()) == r
    assert "each" not in Request(gpus=2).to_dict()  # (whole GPUs are stored as before)
    one = Request(gpus=1, each=0.25)  # one GPU: the plain share
    assert (one.gpus, one.each) == (0.25, 1.0)
    for bad in (0, 1.5, -0.1, "half", True):
        with pytest.raises(UsageError, match="each"):
            Request(gpus=2, each=bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="whole number of GPUs"):
        Request(gpus=0.5, each=0.5)
    with pytest.raises(UsageError, match="allowed only"):
        Request(gpus=3, each=0.1, gpu_ids=(0, 1))


@pytest.mark.parametrize("how", PLACEMENTS)
def test_every_placement_puts_shares_on_distinct_gpus(how: str) -> None:
    cap = Capacity(gpus(4))
    cap.take([0], 0.95, None)  # GPU 0 has 0.05 left: too little
    req = Request(gpus=2, each=0.1)
    pl = place(cap, req, how, Profile.of([req]))
    assert pl is not None and len(set(pl.positions)) == 2 and 0 not in pl.positions
    cap.take([1, 2, 3], 0.95, None)
    assert place(cap, req, how, Profile.of([req])) is None and not could_fit(cap, req)


def test_two_users_share_the_same_two_gpus() -> None:
    """Two jobs of 8000 MiB of each of GPUs 0 and 1 (0.098 of 80 GiB) run side by side; a
    whole-GPU job on those GPUs waits, with the reason naming the holders."""
    each = 8000 * MIB / (80 * GIB)
    a = _job(1, 2, each, 8000 * MIB, gpu_ids=(0, 1))
    b = _job(2, 2, each, 8000 * MIB, gpu_ids=(0, 1))
    whole = _job(3, 1, 1.0, gpu_ids=(0, 1))
    assert _run([a, b, whole]) == {1: (0, 1), 2: (0, 1)}
    assert a.attempt is not None and a.attempt.share == pytest.approx(each)
    assert a.attempt.mem == 8000 * MIB
    d = schedule(Inputs([whole], [a, b], gpus(4)))
    assert d.pending[3].reason is Reason.RESOURCES and "held by job 1, job 2" in d.pending[3].detail


def test_memory_bounds_the_shares_of_each() -> None:
    """The share of each GPU and its memory both bound: ten 8 GiB holders of 0.05 of each of
    two 80 GiB GPUs fill their memory; an eleventh waits though half of each is free."""
    jobs = [_job(i, 2, 0.05, 8 * GIB, gpu_ids=(0, 1)) for i in range(1, 11)]
    started = _run(jobs)
    assert len(started) == 10  # 10 x 8 GiB = 80 GiB, 10 x 0.05 of each
    late = _job(11, 2, 0.05, 1 * GIB, gpu_ids=(0, 1))
    d = schedule(Inputs([late], jobs, gpus(4)))
    assert not d.starts and d.pending[11].reason is Reason.RESOURCES
    assert "needs 0.05 of each of 2 GPUs with 1.0G among GPU 0,1" in d.pending[11].detail


def test_too_few_gpus_is_a_bad_constraint() -> None:
    d = schedule(Inputs([_job(1, 5, 0.1)], [], gpus(4)))
    assert d.pending[1].reason is Reason.BAD_CONSTRAINTS
    assert "needs 0.1 of each of 5 GPUs" in d.pending[1].detail


def test_occupancy_charges_as_the_pass_does() -> None:
    """The simulator's kept capacity equals a fresh build with the shares running, and is
    back to empty once they end."""
    inv = gpus(4)
    jobs = [_job(1, 2, 0.3), _job(2, 3, 0.5), _job(3, 1, 0.25)]
    _run(jobs)
    occ = Occupancy(inv)
    for j in jobs:
        occ.start(j)
    fresh = Capacity(inv)
    for j in jobs:
        a = j.attempt
        assert a is not None
        fresh.take_gpus(a.gpus, a.share, a.mem)
    assert occ.cap.free == fresh.free and occ.cap.mem_free == fresh.mem_free
    assert occ.cap.n_whole_free == fresh.n_whole_free
    for j in jobs:
        occ.end(j)
    assert occ.cap.free == [1.0] * 4 and occ.cap.n_whole_free == 4


def test_a_waiting_share_of_each_is_not_passed_over(make_job: MakeJob) -> None:
    """Behind a blocked head job (a reservation), the pass's quick test that passes jobs over
    counts a share of each by its share, not as whole GPUs: it starts outside the
    reservation, where two halves are free."""
    inv = gpus(5)
    hog = make_job(2, time_limit=50.0)
    halves = [make_job(0.5, time_limit=t) for t in (100.0, 200.0, 300.0)]
    running = [hog, *halves]
    for j, ids in zip(running, ((0, 1), (2,), (3,), (4,)), strict=True):
        transition(j, State.RUNNING, now=0.0, gpus=ids, share=j.request.share)
    head = make_job(3, priority=10)  # waits for GPUs 0, 1, 2: the reservation
    shares = _job(99, 2, 0.2)  # no time limit: no backfill before the head's start
    d = schedule(Inputs([head, shares], running, inv, now=1.0, explain=False))
    assert [(st.job_id, st.gpus) for st in d.starts] == [(99, (3, 4))]
