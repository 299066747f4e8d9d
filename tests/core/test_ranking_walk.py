"""``balanced``'s lazy walk (core/ranking.py) against the slow way, over randomized queues.

The simulator's passes rely on two things a rebuild would give trivially: the walk gives the
pending jobs exactly in ``order_key`` order at ``now``, and once ``schedule()`` narrows it (a
reservation is made), it leaves out exactly the jobs ``schedule()`` would pass over -- those
that fit neither outside the reservation nor, ending before the shadow time, in all that is
free -- and nothing else. Fixed seeds: the same queues every run.
"""

from __future__ import annotations

import random
from typing import Any

from berth.core import Inputs, Job, Request, State, schedule, transition
from berth.core.capacity import EPS, INF
from berth.core.fits import cpu_only
from berth.core.order import order_key
from berth.core.placement import Profile
from berth.core.ranking import Queued, Ranking, Walk
from berth.dependency import Dependency

from .conftest import gpus

Limits = tuple[int, float, float, bool, int, float]  # narrow()'s arguments


def _queue(rng: random.Random, n: int) -> list[Job]:
    jobs = []
    for i in range(1, n + 1):
        g = rng.choice((1, 1, 1, 1, 2, 3, 4, 8, 12, 16, 0.25, 0.5, 0.75, 0))
        job = Job(
            id=i, submit_time=float(rng.randrange(0, 5000)), request=Request(gpus=g),
            time_limit=rng.choice((None, 60.0, 600.0, rng.uniform(1.0, 2e5), rng.uniform(1.0, 2e5))),
            priority=rng.choice((0, 0, 0, 3)), held=rng.random() < 0.03,
            dependencies=(Dependency("afterok", 1),) if rng.random() < 0.03 else (),
        )  # fmt: skip
        job.queue_time = job.submit_time
        jobs.append(job)
    return jobs


def _free(job: Job) -> bool:
    """Jobs a narrowed walk always gives out (their pass has more to do than start them)."""
    return (
        job.request.gpus < 1e-5 or job.held or bool(job.dependencies)
        or job.not_before is not None
    )  # fmt: skip


def _may(job: Job, now: float, lim: Limits) -> bool:
    """schedule()'s test, written out: fits outside the reservation, or ends before the shadow
    time (with a reservation) and fits in all that is free."""
    whole, share, shadow, reserved, whole_all, share_all = lim
    g = job.request.gpus
    if (g <= whole) if g >= 1 else (g - EPS <= share):
        return True
    t = job.time_limit
    ends = reserved and t is not None and now + t <= shadow < INF
    return ends and ((g <= whole_all) if g >= 1 else (g - EPS <= share_all))


def _limits(rng: random.Random, now: float) -> Limits:
    whole = rng.choice((0, 0, 1, 1, 2, 3))
    share = rng.choice((0.0, 0.3, 0.5, 1.0)) if whole == 0 else 1.0
    whole_all = whole + rng.choice((0, 0, 1, 2, 5))
    share_all = max(share, rng.choice((0.0, 0.25, 0.6, 1.0)))
    shadow = now + rng.choice((30.0, 600.0, 5000.0, 1e5, INF))
    return whole, share, shadow, rng.random() < 0.8, whole_all, share_all


def _tighter(rng: random.Random, lim: Limits) -> Limits:
    """A later narrow() of the same pass: capacity only shrank (same reservation)."""
    whole, share, shadow, reserved, whole_all, share_all = lim
    w = rng.randint(0, whole)
    wa = rng.randint(w, max(w, whole_all - (whole - w)))
    s = min(share, rng.choice((0.0, 0.25, share)))
    return w, s, shadow, reserved, wa, max(s, min(share_all, rng.choice((0.0, 0.5, 1.0))))


def test_the_walk_is_the_sorted_order_and_narrowing_leaves_out_exactly_what_cannot_start() -> None:
    rng = random.Random(20261124)
    for _ in range(150):
        ranking = Ranking("balanced")
        jobs = _queue(rng, rng.randrange(1, 250))
        for j in jobs:
            ranking.add(j)
        gone = [j for j in jobs if rng.random() < 0.3]
        for j in gone:  # started or cancelled: out of the queue
            if j.held or j.dependencies or rng.random() < 0.3:
                transition(j, State.CANCELLED, now=5000.0)
            else:
                transition(j, State.RUNNING, now=5000.0, gpus=tuple(range(j.request.count)),
                           share=j.request.share)  # fmt: skip
        ranking.prune(gone)
        left = [j for j in jobs if j.state is State.PENDING]
        now = rng.choice((5000.0, 6000.0, 50_000.0, 1e6))
        want = sorted(left, key=lambda j: order_key(j, "balanced", now))
        view = ranking.at(now)
        assert list(view) == want

        # narrowed after k jobs were given out, and maybe narrowed again later
        walk = view.walk()  # type: ignore[attr-defined]
        k = rng.randrange(0, min(len(want), 6) + 1)
        got = [next(walk) for _ in range(k)]
        lim = _limits(rng, now)
        walk.narrow(*lim)
        rest = [j for j in want[k:] if _free(j) or _may(j, now, lim)]
        m = rng.randrange(0, len(rest) + 1)
        for _ in range(m):
            got.append(next(walk))
        lim2 = _tighter(rng, lim)
        walk.narrow(*lim2)
        rest2 = [j for j in rest[m:] if _free(j) or _may(j, now, lim2)]
        got.extend(walk)
        assert got == want[:k] + rest[:m] + rest2


def test_a_narrowed_walk_leaves_out_short_jobs_too_big_for_all_that_is_free() -> None:
    """One whole GPU free (inside the reservation), shadow far away: the short 4-GPU jobs
    would end in time but cannot fit; the short 1-GPU job is the one that may start."""
    ranking = Ranking("balanced")
    for i in range(1, 40):
        job = Job(id=i, submit_time=float(i), request=Request(gpus=4), time_limit=100.0)
        job.queue_time = job.submit_time
        ranking.add(job)
    small = Job(id=99, submit_time=50.0, request=Request(gpus=1), time_limit=100.0)
    small.queue_time = small.submit_time
    ranking.add(small)
    walk = ranking.at(1000.0).walk()  # type: ignore[attr-defined]
    walk.narrow(0, 0.0, 5000.0, True, 1, 1.0)
    assert [j.id for j in walk] == [99]


def test_the_ranking_counts_its_cpu_only_jobs_through_adds_and_prunes() -> None:
    """``Ranking.cpu_only`` is what ``fits.cpu_only`` would find by walking the queue."""
    rng = random.Random(20261128)
    for policy in ("balanced", "fifo"):
        ranking = Ranking(policy)
        here: list[Job] = []
        for _ in range(40):
            for j in _queue(rng, rng.randrange(0, 30)):
                j.id += 1000 * len(here) + rng.randrange(10**6) * 10**4  # unique ids
                if rng.random() < 0.3:
                    j.request = Request(gpus=0, cpu=rng.choice((0, 2)))
                ranking.add(j)
                here.append(j)
            gone = [j for j in here if rng.random() < 0.3]
            for j in gone:
                transition(j, State.CANCELLED, now=5000.0)
            ranking.prune(gone)
            here = [j for j in here if j.state is State.PENDING]
            want = sum(j.request.gpus == 0 and bool(j.request.cpu) for j in here)
            assert ranking.cpu_only == want
            assert (ranking.cpu_only > 0) == cpu_only(here)


def _queue_behind_full_gpus(policy: str) -> tuple[Ranking, list[Job]]:
    """2,000 one-GPU jobs ranked under ``policy``, and four jobs holding the four GPUs."""
    ranking = Ranking(policy)
    for i in range(1, 2001):
        job = Job(id=i, submit_time=float(i), request=Request(gpus=1))
        job.queue_time = job.submit_time
        ranking.add(job)
    holders = []
    for i in range(2001, 2005):
        h = Job(id=i, submit_time=0.0, request=Request(gpus=1))
        transition(h, State.RUNNING, now=1.0, gpus=(i - 2001,), share=1.0)
        holders.append(h)
    return ranking, holders


def test_a_pass_with_every_gpu_taken_does_not_walk_the_whole_queue(monkeypatch: Any) -> None:
    """With no GPU free, the pass stops at the first job it cannot place; asking whether some
    pending job is CPU-only reads the ranking's count instead of walking the 2,000 others
    (it did, once a pass: ~15 % of the daemon's samples in bench/peers.py's throughput)."""
    ranking, holders = _queue_behind_full_gpus("balanced")
    walked = 0
    real = Walk.__next__

    def counting(self: Walk) -> Job:
        nonlocal walked
        walked += 1
        return real(self)

    monkeypatch.setattr(Walk, "__next__", counting)
    profile = Profile.later(ranking.requests, constrained=False)  # (as the daemon's passes)
    d = schedule(Inputs(ranking.at(3000.0), holders, gpus(4), now=3000.0, explain=False,
                        presorted=True, profile=profile))  # fmt: skip
    assert d.starts == []
    assert walked < 10, walked


def test_a_guarded_pass_with_every_gpu_taken_does_not_walk_the_whole_queue(
    monkeypatch: Any,
) -> None:
    """The same under ``guarded`` (the default policy), whose ranking the pass reads as a
    ``Queued``: whether some pending job is CPU-only is the ranking's count, not a walk of
    the 2,000 jobs once a pass (it was: every pass of the daemon's 2,000-job burst with the
    GPUs full walked the whole queue, ~4 % of its thread, more with a longer queue)."""
    ranking, holders = _queue_behind_full_gpus("guarded")
    walked = 0

    def counting(self: Queued) -> Any:
        nonlocal walked
        for job in self.ranking.jobs:
            walked += 1
            yield job

    monkeypatch.setattr(Queued, "__iter__", counting)
    pending = ranking.at(3000.0)
    assert isinstance(pending, Queued)
    profile = Profile.later(ranking.requests(), constrained=False)
    d = schedule(Inputs(pending, holders, gpus(4), now=3000.0, explain=False,
                        presorted=True, profile=profile, policy="guarded"))  # fmt: skip
    assert d.starts == []
    assert walked < 10, walked
