"""An array's tasks one after another are decided alike (berth/core/alike.py, issue 35): a
pass that explains gates and places the first task that waits for resources, not each task
after it, and decides and says exactly what a pass that looks at each task says."""

from __future__ import annotations

import random
from typing import Any

import pytest
from helpers import count_calls

from berth.core import Inputs, Job, Request, State, alike, schedpass, schedule, transition
from berth.core.limits import UserLimits
from berth.core.reservations import Window

from .conftest import gpus


def _queue(rng: random.Random) -> tuple[list[Job], list[Job]]:
    """Arrays (tasks sharing one request object, as the daemon's job table shares them) with
    held, delayed, dependent and grouped tasks among them, single jobs, some running."""
    jobs: list[Job] = []
    for a in range(rng.randint(1, 6)):
        req = Request(gpus=rng.choice([0.5, 1, 1, 2, 4]))
        user = rng.choice(["ann", "bob"])
        for _ in range(rng.randint(1, 30)):
            i = len(jobs) + 1
            kw: dict[str, Any] = {}
            roll = rng.random()
            if roll < 0.05:
                kw["held"] = True
            elif roll < 0.1:
                kw["not_before"] = rng.choice([5.0, 50.0])
            elif roll < 0.13 and jobs:
                kw["dependencies"] = Job.from_dict(
                    {
                        "id": 0,
                        "submit_time": 0,
                        "dependencies": [f"afterok:{rng.randint(1, i - 1)}"],
                    }
                ).dependencies
            if a % 3 == 2:
                kw["group"], kw["group_limit"] = f"arr{a}", 2
            jobs.append(Job(id=i, submit_time=float(i), request=req, user=user, tenant=user,
                            time_limit=rng.choice([None, 60.0, 600.0]), **kw))  # fmt: skip
    running = []
    for j in rng.sample(jobs, k=min(len(jobs), rng.randint(0, 4))):
        if j.state is State.PENDING and not j.held and j.request.count <= 2 and not j.dependencies:
            j.not_before = None
            transition(j, State.RUNNING, now=0.0, gpus=tuple(range(j.request.count)))
            running.append(j)
    return [j for j in jobs if j.state is State.PENDING], running


def _decide(inp: Inputs) -> Any:
    d = schedule(inp)
    return (
        {i: (p.reason, p.detail) for i, p in d.pending.items()},
        [(s.job_id, s.gpus, s.share) for s in d.starts],
        d.order, d.expected, d.wakeup, [(c.job_id, c.reason) for c in d.cancels], d.partial,
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(60))
def test_a_pass_says_what_it_says_deciding_each_task(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    pending, running = _queue(rng)
    kw: dict[str, Any] = {"policy": rng.choice(["balanced", "fifo", "guarded", "fairshare"])}
    if rng.random() < 0.3:
        kw["limits"] = UserLimits(max_gpus={"ann": 2.0})
    if rng.random() < 0.2:
        kw["reservations"] = [Window(1, (0,), 100.0, 200.0, users=frozenset({"bob"}))]
    inp = Inputs(pending, running, gpus(rng.choice([2, 4, 8])), now=10.0, **kw)
    fast = _decide(inp)
    monkeypatch.setattr(alike, "waits_alike", lambda job, before: False)
    assert fast == _decide(inp)


def test_an_arrays_tasks_are_placed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """10 arrays of 1,000 tasks on 8 busy GPUs (each array's request unlike the one before):
    each array's first task is gated, placed and reserved, its other tasks wait alike (each was
    gated, placed and reserved: 10,000)."""
    jobs: list[Job] = []
    for a in range(10):
        req = Request(gpus=1 + a % 2)
        jobs += [Job(id=len(jobs) + k + 1, submit_time=float(len(jobs) + k + 1), request=req)
                 for k in range(1000)]  # fmt: skip
    busy = [Job(id=100_000 + g, submit_time=0.0, request=Request(gpus=1)) for g in range(8)]
    for g, j in enumerate(busy):
        transition(j, State.RUNNING, now=0.0, gpus=(g,))
    placed = count_calls(monkeypatch, schedpass.Pass, "place")
    reserved = count_calls(monkeypatch, schedpass.Pass, "reserve")
    d = schedule(Inputs(jobs, busy, gpus(8), now=1.0, policy="balanced"))  # (in submit order)
    assert len(d.order) == 10_000 and len(d.pending) == 10_000 and not d.starts
    assert placed.n == 10  # (was 10,000)
    assert reserved.n == 10  # one reservation and detail a run (was 10,000: one a task)
    assert {p.reason.value for p in d.pending.values()} == {"Resources"}
