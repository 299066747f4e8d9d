"""The daemon's queue order kept between passes (berth/daemon/engine/queue_order.py, issue 21):
under ``balanced`` a pass after a change walks a ranking kept incrementally, in exactly the
order a full sort at the pass's time gives, through jobs joining, leaving, rejoining
(requeued) and failed commits; a change does not re-rank the queue."""

from __future__ import annotations

import random

from berth.core import Job, Request, State, transition
from berth.core.order import order_key
from berth.daemon.engine import queue_order
from berth.daemon.engine.queue_order import QueueOrder


def _sorted(jobs: dict[int, Job], now: float) -> list[int]:
    pending = [j for j in jobs.values() if j.state is State.PENDING]
    return [j.id for j in sorted(pending, key=lambda j: order_key(j, "balanced", now))]


def test_the_kept_order_is_a_full_sort_through_every_kind_of_change() -> None:
    rng = random.Random(21)
    jobs: dict[int, Job] = {}
    order = QueueOrder()
    now = 0.0
    next_id = 1
    for step in range(300):
        now += rng.random() * 3
        kind = rng.random()
        pending = [j for j in jobs.values() if j.state is State.PENDING]
        if kind < 0.5 or not pending:  # a new job
            j = Job(
                id=next_id, submit_time=now, request=Request(gpus=rng.choice([0.5, 1, 2])),
                priority=rng.choice([0, 0, 5]), time_limit=rng.choice([None, 60.0, 3600.0]),
                user=rng.choice(["ann", "bob"]),
            )  # fmt: skip
            next_id += 1
            jobs[j.id] = j
            order.joined(j)
        elif kind < 0.8:  # one starts (or is cancelled)
            j = rng.choice(pending)
            if rng.random() < 0.5:
                transition(j, State.RUNNING, now=now, gpus=tuple(range(j.request.count)))
            else:
                transition(j, State.CANCELLED, now=now)
            order.left(j)
        elif kind < 0.9:  # a running one is requeued: it rejoins the queue
            running = [j for j in jobs.values() if j.state is State.RUNNING]
            if running:
                j = rng.choice(running)
                transition(j, State.PREEMPTED, now=now)
                if j.state is State.PENDING:
                    order.joined(j)
        else:  # a commit failed: its job was never accepted
            j = rng.choice(pending)
            del jobs[j.id]
            order.joined()
        if step % 3 == 0:  # (passes come between some changes, not all)
            got = [j.id for j in order.pending(jobs.values(), "balanced", now)]
            assert got == _sorted(jobs, now), step
            assert order.tenants == len(
                {j.tenant for j in jobs.values() if j.state is State.PENDING}
            )


def test_a_change_in_a_long_queue_neither_re_ranks_it_nor_rebuilds_its_profile(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    jobs = {
        i: Job(id=i, submit_time=i / 10, request=Request(gpus=1), time_limit=600.0)
        for i in range(1, queue_order.SHORT * 2)
    }
    order = QueueOrder()
    list(order.pending(jobs.values(), "balanced", 500.0))
    profile = order.profile
    added: list[int] = []
    real_add = queue_order.Ranking.add
    monkeypatch.setattr(
        queue_order.Ranking, "add", lambda self, j: (added.append(j.id), real_add(self, j))
    )
    new = Job(id=10**6, submit_time=501.0, request=Request(gpus=1), time_limit=600.0)
    jobs[new.id] = new
    order.joined(new)
    first = next(iter(order.pending(jobs.values(), "balanced", 502.0)))
    assert added == [new.id]  # only the newcomer was ranked
    assert order.profile is profile  # one job more in thousands: the same demand
    assert first.id == _sorted(jobs, 502.0)[0]


def test_the_profile_of_a_short_queue_is_its_pending_demand_and_listed_only_when_read(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The packer's profile describes the queue of the pass that made it, whether some of
    its demand is restricted to some GPUs is known without listing the queue, and a pass
    whose placements read no more than that never lists it."""
    from berth.core.profile import Profile, restricts

    listed: list[int] = []
    real = queue_order.Ranking.requests
    monkeypatch.setattr(
        queue_order.Ranking, "requests", lambda self: (listed.append(1), real(self))[1]
    )
    rng = random.Random(7)
    jobs: dict[int, Job] = {}
    order = QueueOrder()
    for step in range(200):
        pending = [j for j in jobs.values() if j.state is State.PENDING]
        if rng.random() < 0.6 or not pending:
            j = Job(
                id=step + 1, submit_time=float(step),
                request=Request(gpus=rng.choice([0.5, 1, 2]),
                                gpu_ids=rng.choice([None, None, None, (0, 1)])),
            )  # fmt: skip
            jobs[j.id] = j
            order.joined(j)
        else:
            j = rng.choice(pending)
            transition(j, State.CANCELLED, now=float(step))
            order.left(j)
        list(order.pending(jobs.values(), "balanced", float(step)))
        requests = [j.request for j in jobs.values() if j.state is State.PENDING]
        listed.clear()
        assert order.profile.constrained == any(restricts(r) for r in requests), step
        assert not listed  # (known from the ranking's count)
        want = Profile.of(requests)
        for x in (0.0, 0.25, 0.5, 1.0, 1.5):
            assert order.profile.p_size_above(x) == want.p_size_above(x), (step, x)
        assert listed == [1]  # listed once, when the distribution was first read


def test_whether_a_job_without_gpus_waits_is_counted_through_every_kind_of_change() -> None:
    """``counted_without_gpu`` (what a pass asks when every GPU is taken: could a -g 0 job
    start?) is the truth of the queue whenever it answers, through joins, starts, cancels
    and rejoins; it answers None (the caller walks the queue) when it cannot know."""
    rng = random.Random(35)
    jobs: dict[int, Job] = {}
    order = QueueOrder()
    now, answered = 0.0, 0
    for step in range(400):
        now += 1.0
        pending = [j for j in jobs.values() if j.state is State.PENDING]
        kind = rng.random()
        if kind < 0.5 or not pending:
            j = Job(id=step + 1, submit_time=now, request=Request(gpus=rng.choice([0, 0.5, 1, 2])))
            jobs[j.id] = j
            order.joined(j)
        elif kind < 0.9:
            j = rng.choice(pending)
            if j.request.gpus and rng.random() < 0.5:
                transition(j, State.RUNNING, now=now, gpus=tuple(range(j.request.count)))
            else:
                transition(j, State.CANCELLED, now=now)
            order.left(j)
        else:
            running = [j for j in jobs.values() if j.state is State.RUNNING]
            if running:
                j = rng.choice(running)
                transition(j, State.PREEMPTED, now=now)
                if j.state is State.PENDING:
                    order.joined(j)
        if step % 4 == 0:
            order.pending(jobs.values(), "balanced", now)
        known = order.counted_without_gpu()
        truth = any(j.request.gpus == 0 for j in jobs.values() if j.state is State.PENDING)
        if known is not None:
            answered += 1
            assert known == truth, step
        assert order.waits_without_gpu(jobs.values) == truth, step
    assert answered > 200  # (it answers most of the time: the walk it spares is the point)


def test_a_pass_with_every_gpu_taken_does_not_walk_the_jobs(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With every GPU held by our jobs, a pass asks only whether a job needing no GPU
    waits: the queue's count answers, not a walk of every job the daemon knows (that walk
    was the whole queue at every event, a 100,000-job queue's at every submit)."""
    from enginekit import EngineRig

    from berth.daemon.engine.jobtable import JobTable

    rig = EngineRig(tmp_path, gpus=1)
    try:
        blocker = rig.submit("sleep", "1000")
        rig.turn()
        assert rig.state(blocker) == "RUNNING"
        waiting = [rig.submit("sleep", "1") for _ in range(50)]
        rig.turn()
        walks = 0
        real = JobTable.values

        def counting(self: JobTable):  # type: ignore[no-untyped-def]
            nonlocal walks
            walks += 1
            return real(self)

        monkeypatch.setattr(JobTable, "values", counting)
        rig.engine.schedule_pass()
        assert walks == 0
        assert {rig.state(j) for j in waiting} == {"PENDING"}
        monkeypatch.setattr(JobTable, "values", real)
        rig.submit("sleep", "1", gpus=0, hold=True)  # a -g 0 job waits: a pass goes on
        assert rig.engine._full() is False
    finally:
        rig.close()
