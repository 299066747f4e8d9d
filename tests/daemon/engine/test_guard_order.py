"""``guarded`` in the daemon (issue 32.1): the queue order keeps the record of arrivals the
guard compares (berth/daemon/engine/queue_order.py, berth/core/guard.py), so the pass the
daemon runs finds the overdue job as the simulator's does; a start undone is no arrival."""

from __future__ import annotations

from berth.core import GIB, Gpu, Inputs, Job, Request, State, schedule, transition
from berth.daemon.engine.queue_order import QueueOrder

H = 3600.0


def test_the_daemons_record_makes_the_oldest_job_overdue() -> None:
    order = QueueOrder()
    gpu = [Gpu(0, "GPU-0", "A100", 80 * GIB)]
    x = Job(id=1, submit_time=0.0, request=Request(gpus=1), time_limit=H)
    order.joined(x)
    transition(x, State.RUNNING, now=0.0, gpus=(0,))
    order.left(x)
    old = Job(id=2, submit_time=1.0, request=Request(gpus=1), time_limit=10 * H)
    order.joined(old)
    jobs = {1: x, 2: old}
    for i in range(3, 1203):  # 1,200 one-minute jobs after it; all but 5 ran and ended
        j = Job(id=i, submit_time=float(i), request=Request(gpus=1), time_limit=60.0)
        order.joined(j)
        jobs[i] = j
        if i < 1198:
            transition(j, State.RUNNING, now=float(i), gpus=(0,))
            order.left(j)
            transition(j, State.COMPLETED, now=float(i), exit_code=0)
    n = len(order.arrivals.times)
    order.joined(old)  # (a start undone: the job rejoins, it did not arrive again)
    assert len(order.arrivals.times) == n == 1202
    now = 1300.0
    pending = order.pending(jobs.values(), "guarded", now)
    # 72,000 s of work came after the old job: 1.6x the work left at most (36,000 + 300 +
    # what x has left, 2,300)
    d = schedule(Inputs(pending, [x], gpu, now=now, policy="guarded",
                        presorted=order.presorted, arrivals=order.arrivals.any()))  # fmt: skip
    assert d.order[0] == old.id and d.expected == {old.id: H}
    # without the record (a daemon just restarted): only the jobs it holds count
    d = schedule(Inputs(pending, [x], gpu, now=now, policy="guarded"))
    assert d.order[0] == 1198 and list(d.expected) == [1198]


def test_the_kept_guarded_queue_is_the_sorted_queue_after_joins_and_leaves() -> None:
    """Under guarded (the default) the daemon keeps the queue in a Ranking: after jobs join,
    start and are cancelled, the pass reads the same order, the same jobs oldest first and
    the same work as a fresh sort of the pending jobs (no walk, no sort of its own)."""
    from berth.core.guard import work
    from berth.core.policy import order_key

    order = QueueOrder()
    jobs: dict[int, Job] = {}
    for i in range(1, 41):
        j = Job(id=i, submit_time=float(i), request=Request(gpus=1 + i % 3),
                time_limit=float(60 * (1 + (i * 7) % 11)))  # fmt: skip
        jobs[i] = j
        order.joined(j)
    assert len(order.pending(jobs.values(), "guarded", 50.0)) == 40 and order.presorted
    for i in (3, 17, 40):  # started
        transition(jobs[i], State.RUNNING, now=50.0, gpus=tuple(range(int(jobs[i].request.gpus))))
        order.left(jobs[i])
    for i in (8, 21):  # cancelled from the middle
        transition(jobs[i], State.CANCELLED, now=50.0)
        order.left(jobs[i])
    late = Job(id=41, submit_time=60.0, request=Request(gpus=1), time_limit=30.0)
    jobs[41] = late
    order.joined(late)
    kept = order.pending(jobs.values(), "guarded", 70.0)
    left = [j for j in jobs.values() if j.state is State.PENDING]
    assert list(kept) == sorted(left, key=lambda j: order_key(j, "guarded"))
    assert kept[0] is late  # (30 GPU-s: the smallest)
    assert [j.id for j in kept.by_queue()] == sorted(j.id for j in left)  # type: ignore[attr-defined]
    assert kept.work == sum(map(work, left))  # type: ignore[attr-defined]
