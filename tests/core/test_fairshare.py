"""Fair share by decayed GPU usage (issue 11.3), in the pure core: the arithmetic, the order
between users and within a user, and constructed scenarios (two users flooding the queue;
a 4-GPU job behind a stream of 1-GPU jobs)."""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Sequence

import pytest

from berth.core import Inputs, Job, Request, State, schedule, transition
from berth.core.fairshare import (
    Book,
    FairShare,
    accrued,
    decay,
    factors,
    interleave,
    usage_at,
)

from .conftest import gpus

MakeJob = Callable[..., Job]
DAY = 86400.0


def test_decay_halves_every_half_life() -> None:
    assert decay(8.0, 2 * DAY, DAY) == pytest.approx(2.0)
    assert decay(8.0, 0.0, DAY) == 8.0
    assert decay(8.0, -5.0, DAY) == 8.0  # (a clock that went back adds nothing)
    assert decay(8.0, 1e9, math.inf) == 8.0


def test_accrued_is_the_decayed_integral() -> None:
    # 2 GPUs for a day, seen a day after it ended, half-life a day: the exact integral...
    got = accrued(2.0, 0.0, DAY, 2 * DAY, DAY)
    n = 100_000
    riemann = sum(2.0 * 2 ** (-(2 * DAY - (k + 0.5) * DAY / n) / DAY) for k in range(n)) * DAY / n
    assert got == pytest.approx(riemann, rel=1e-9)
    assert accrued(2.0, 0.0, 100.0, 100.0, math.inf) == 200.0
    assert accrued(1.0, 0.0, 10.0, 10.0, 7 * DAY) == pytest.approx(10.0, rel=1e-4)
    assert accrued(1.0, 10.0, 5.0, 20.0, DAY) == 0.0  # an empty interval
    assert accrued(1.0, 0.0, 50.0, 20.0, math.inf) == 20.0  # not beyond now


def test_the_book_ages_what_it_keeps_and_adds_attempts() -> None:
    book = Book(DAY)
    hour = DAY / math.log(2) * (1 - 2 ** (-1 / 24))  # an hour, the first seconds decayed
    assert book.add("alice", 1.0, 0.0, 3600.0, 3600.0) == pytest.approx(hour)
    assert 3540 < hour < 3600
    assert book.value("alice", 3600.0 + DAY) == pytest.approx(hour / 2)
    book.add("alice", 2.0, 3600.0 + DAY, 3600.0 + DAY + 100.0, 3600.0 + DAY + 100.0)
    assert book.value("alice", 3600.0 + DAY + 100.0) == pytest.approx(hour / 2 + 200.0, rel=1e-3)
    assert book.value("nobody", 0.0) == 0.0
    with pytest.raises(ValueError, match="half-life"):
        Book(0.0)


def test_usage_counts_running_jobs_so_far(make_job: MakeJob) -> None:
    book = Book(math.inf, {"alice": (100.0, 0.0)})
    job = make_job(2, user="alice")
    transition(job, State.RUNNING, now=50.0, gpus=(0, 1))
    other = make_job(1, user="bob")
    transition(other, State.RUNNING, now=90.0, gpus=(2,))
    assert usage_at(book, [job, other], 100.0) == {"alice": 200.0, "bob": 10.0}


def test_factor_is_slurms_classic_two_to_the_minus_usage_over_shares() -> None:
    fair = FairShare({"alice": 300.0, "bob": 100.0, "carol": 0.0})
    f = factors(fair, ["alice", "bob", "carol"])
    assert f["carol"] == 1.0
    assert f["alice"] == pytest.approx(2 ** (-0.75 / (1 / 3)))
    assert f["bob"] == pytest.approx(2 ** (-0.25 / (1 / 3)))
    weighted = factors(FairShare({"a": 1.0, "b": 1.0}, {"a": 3.0}), ["a", "b"])
    assert weighted["a"] > weighted["b"]


def _users(jobs: Sequence[Job], d: object) -> list[str]:
    by_id = {j.id: j for j in jobs}
    return [by_id[s.job_id].user for s in d.starts]  # type: ignore[attr-defined]


def test_lower_usage_goes_first_whatever_the_priority_or_age(make_job: MakeJob) -> None:
    old_high = make_job(1, user="alice", priority=10)
    young = make_job(1, user="bob")
    fair = FairShare({"alice": 10.0, "bob": 5.0})
    d = schedule(Inputs([old_high, young], [], gpus(1), fair=fair))
    assert _users([old_high, young], d) == ["bob"]
    # without fair share, alice's priority wins
    assert _users([old_high, young], schedule(Inputs([old_high, young], [], gpus(1)))) == ["alice"]


def test_shares_weigh_usage(make_job: MakeJob) -> None:
    a, b = make_job(1, user="alice"), make_job(1, user="bob")
    fair = FairShare({"alice": 10.0, "bob": 5.0}, {"alice": 4.0})
    assert _users([a, b], schedule(Inputs([a, b], [], gpus(1), fair=fair))) == ["alice"]


def test_priority_orders_a_users_own_jobs_only(make_job: MakeJob) -> None:
    first = make_job(1, user="alice")
    urgent = make_job(1, user="alice", priority=5)
    bobs = make_job(1, user="bob", priority=100)
    fair = FairShare({"alice": 1.0, "bob": 2.0})
    d = schedule(Inputs([first, urgent, bobs], [], gpus(1), fair=fair))
    assert [s.job_id for s in d.starts] == [urgent.id]
    # the order a pass considers them in: alice's (by her priority), then bob's
    order = list(interleave([bobs, urgent, first], fair, {}))
    assert [j.id for j in order] == [urgent.id, first.id, bobs.id]


@pytest.mark.parametrize("policy", ["fifo", "priority", "sjf", "balanced", "guarded"])
def test_between_users_of_equal_usage_the_policys_order_decides(
    make_job: MakeJob, policy: str
) -> None:
    """Two users with the same usage (both new: 0) are a tie of fair share: the policy's order
    decides between their jobs, as with one user, not their names. bob's job, submitted first,
    went after alice's later one in every policy, fifo too ("ties go to the name"): on a fresh
    daemon the alphabetically first user always went first."""
    bobs = make_job(1, user="bob", t=0.0, time_limit=3600.0)
    alices = make_job(1, user="alice", t=100.0, time_limit=3600.0)
    for fair in (FairShare({}), FairShare({"alice": 7.0, "bob": 7.0})):
        d = schedule(Inputs([alices, bobs], [], gpus(1), now=500.0, policy=policy, fair=fair))
        assert [s.job_id for s in d.starts] == [bobs.id], (policy, fair)
    # a lower usage still goes first, whatever the order
    d = schedule(Inputs([alices, bobs], [], gpus(1), now=500.0, policy=policy,
                        fair=FairShare({"alice": 6.0, "bob": 7.0})))  # fmt: skip
    assert [s.job_id for s in d.starts] == [alices.id]


def test_running_jobs_count_so_a_user_holding_gpus_is_not_cheap(make_job: MakeJob) -> None:
    long = [make_job(1, user="alice") for _ in range(3)]
    for k, job in enumerate(long):
        transition(job, State.RUNNING, now=0.0, gpus=(k,))
    mine, theirs = make_job(1, user="alice", t=50.0), make_job(1, user="bob", t=60.0)
    book = Book()  # nothing ended yet
    fair = FairShare(usage_at(book, long, 100.0))
    d = schedule(Inputs([mine, theirs], long, gpus(4), now=100.0, fair=fair))
    assert _users([mine, theirs], d) == ["bob"]
    assert d.pending[mine.id].reason.value == "Resources"


def test_gpus_freed_at_once_are_shared_out(make_job: MakeJob) -> None:
    jobs = [make_job(1, user=u, time_limit=600.0) for u in ("alice", "bob") for _ in range(4)]
    fair = FairShare({"alice": 100.0, "bob": 101.0})  # alice a little lower
    d = schedule(Inputs(jobs, [], gpus(4), fair=fair))
    assert sorted(_users(jobs, d)) == ["alice", "alice", "bob", "bob"]


def test_with_one_user_the_order_is_the_policys(make_job: MakeJob) -> None:
    rng = random.Random(7)
    for policy in ("balanced", "priority", "sjf", "fifo-backfill"):
        jobs = [
            make_job(rng.choice([1, 1, 2, 4, 0.5]), user="alice", priority=rng.randint(0, 2),
                     time_limit=rng.choice([None, 60.0, 3600.0]), t=float(k))
            for k in range(40)
        ]  # fmt: skip
        plain = schedule(Inputs(jobs, [], gpus(8), now=100.0, policy=policy))
        fair = schedule(Inputs(jobs, [], gpus(8), now=100.0, policy=policy,
                        fair=FairShare({"alice": 5.0})))  # fmt: skip
        assert fair.starts == plain.starts and fair.pending == plain.pending


# -- constructed scenarios: an event loop around schedule() ---------------------------------


def replay(
    jobs: list[tuple[float, str, int, float, float | None]],
    n_gpus: int,
    *,
    fair: bool,
    policy: str = "balanced",
) -> dict[int, tuple[Job, float, float]]:
    """Run ``(submit, user, gpus, duration, limit)`` jobs on ``n_gpus`` GPUs, as the daemon
    would (one pass per event time); job id -> (job, start, end)."""
    made = [
        Job(id=i + 1, submit_time=t, user=u, request=Request(gpus=g), time_limit=lim)
        for i, (t, u, g, _, lim) in enumerate(jobs)
    ]
    dur = {j.id: jobs[i][3] for i, j in enumerate(made)}
    book = Book()
    pending: list[Job] = []
    running: dict[int, Job] = {}
    ends: list[tuple[float, int]] = []
    out: dict[int, tuple[Job, float, float]] = {}
    k = 0
    while k < len(made) or ends:
        now = min(
            made[k].submit_time if k < len(made) else math.inf, ends[0][0] if ends else math.inf
        )
        while ends and ends[0][0] <= now:
            _, jid = heapq.heappop(ends)
            job = running.pop(jid)
            transition(job, State.COMPLETED, now=now, exit_code=0)
            a = job.attempts[-1]
            book.add(job.tenant, job.request.gpu_amount, a.start, now, now)
        while k < len(made) and made[k].submit_time <= now:
            pending.append(made[k])
            k += 1
        share = FairShare(usage_at(book, running.values(), now)) if fair else None
        d = schedule(Inputs(pending, list(running.values()), gpus(n_gpus), now=now, policy=policy,
                     fair=share))  # fmt: skip
        by_id = {j.id: j for j in pending}
        for s in d.starts:
            job = by_id[s.job_id]
            transition(job, State.RUNNING, now=now, gpus=s.gpus)
            running[job.id] = job
            heapq.heappush(ends, (now + dur[job.id], job.id))
            out[job.id] = (job, now, now + dur[job.id])
        pending = [j for j in pending if j.state is State.PENDING]
    return out


def gpu_seconds(runs: dict[int, tuple[Job, float, float]], user: str, until: float) -> float:
    return sum(
        j.request.gpu_amount * (min(e, until) - s)
        for j, s, e in runs.values()
        if j.user == user and s < until
    )


def test_two_users_flooding_the_queue_get_gpu_hours_within_10_percent() -> None:
    """Alice floods the queue first, bob five minutes later, with jobs of 1 or 2 GPUs of
    1-20 minutes (no time limits). Over the busy period (until either has no job left to
    start) their GPU-hours are within 10% of each other; without fair share alice, first in
    line, gets nearly everything."""
    rng = random.Random(11)
    jobs: list[tuple[float, str, int, float, float | None]] = []
    for user, t0 in (("alice", 0.0), ("bob", 300.0)):
        for k in range(120):
            jobs.append((t0 + k, user, rng.choice([1, 1, 2]), rng.uniform(60.0, 1200.0), None))
    jobs.sort(key=lambda j: j[0])
    for fair, within in ((True, True), (False, False)):
        runs = replay(jobs, 8, fair=fair)
        last_start = {
            u: max(s for j, s, _ in runs.values() if j.user == u) for u in ("alice", "bob")
        }
        busy = min(last_start.values())  # both still had jobs waiting until then
        a, b = gpu_seconds(runs, "alice", busy), gpu_seconds(runs, "bob", busy)
        gap = abs(a - b) / max(a, b)
        assert (gap <= 0.10) is within, (fair, a / 3600, b / 3600, gap)


def test_a_4_gpu_job_behind_a_stream_of_1_gpu_jobs_starts_within_the_longest_limit() -> None:
    """Bob keeps the 4 GPUs busy with a stream of 1-GPU jobs (limit L = 100 s, running 50-100
    s), arriving twice as fast as they run. Alice submits a 4-GPU job at t = 300. The bound: it
    starts by t + L (it is first in line, as alice has used less than bob; its reservation
    is the 4 GPUs, which free by the end of the limits of the jobs running on them; later
    1-GPU jobs may not start there unless they end by then). Without fair share it waits for
    the jobs queued before it."""
    rng = random.Random(3)
    limit = 100.0
    stream = [(k * 8.0, "bob", 1, rng.uniform(50.0, limit), limit) for k in range(200)]
    big = (300.0, "alice", 4, 60.0, limit)
    jobs = sorted([*stream, big], key=lambda j: j[0])
    big_id = jobs.index(big) + 1
    runs = replay(jobs, 4, fair=True)
    start = runs[big_id][1]
    assert start <= 300.0 + limit, start
    later = replay(jobs, 4, fair=False)[big_id][1]
    assert later > 300.0 + 2 * limit  # (without: the stream queued before it goes first)


def test_the_bound_holds_within_one_user_for_equal_limits() -> None:
    """The same stream and the 4-GPU job of one user (``balanced``, equal limits): the job
    outranks every later job, so it starts within L once the jobs submitted before it have
    started (its turn)."""
    rng = random.Random(5)
    limit = 100.0
    stream = [(k * 8.0, "bob", 1, rng.uniform(50.0, limit), limit) for k in range(200)]
    big = (300.5, "bob", 4, 60.0, limit)
    jobs = sorted([*stream, big], key=lambda j: j[0])
    big_id = jobs.index(big) + 1
    runs = replay(jobs, 4, fair=True)
    before = max(s for j, s, _ in runs.values() if j.submit_time < 300.5)
    assert runs[big_id][1] <= before + limit


def test_without_time_limits_the_reserved_gpus_are_kept_for_it() -> None:
    """No limits: the end of running jobs is unknown, so the GPUs the 4-GPU job needs are kept
    for it as they free: it starts when the jobs running when it became first in line end."""
    rng = random.Random(9)
    stream = [(k * 8.0, "bob", 1, rng.uniform(50.0, 100.0), None) for k in range(200)]
    big = (300.0, "alice", 4, 60.0, None)
    jobs = sorted([*stream, big], key=lambda j: j[0])
    big_id = jobs.index(big) + 1
    runs = replay(jobs, 4, fair=True)
    running_then = [e for j, s, e in runs.values() if s <= 300.0 < e]
    assert runs[big_id][1] <= max(running_then)
