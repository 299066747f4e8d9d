"""`berth simulate --what-if` (`berth queue --start`) on a daemon with fair share and per-user
limits: the prediction replays the users' usage and limits as the daemon's passes will."""

from __future__ import annotations

from berth.core import GIB, Job, Request, State, transition
from berth.core.inventory import Gpu
from berth.core.limits import UserLimits
from berth.sim.whatif import predict


def gpus(n: int) -> list[Gpu]:
    return [Gpu(i, f"G{i}", "A100", 80 * GIB) for i in range(n)]


def _queue() -> tuple[list[Job], list[Job]]:
    r = Job(id=1, submit_time=0.0, user="alice", request=Request(gpus=1), time_limit=200.0)
    transition(r, State.RUNNING, now=0.0, gpus=(0,))
    mine = Job(id=2, submit_time=1.0, user="alice", request=Request(gpus=1), time_limit=100.0)
    theirs = Job(id=3, submit_time=2.0, user="bob", request=Request(gpus=1), time_limit=100.0)
    return [mine, theirs], [r]


def test_the_user_who_used_less_is_predicted_first() -> None:
    pending, running = _queue()
    plain = predict(pending, running, gpus(1), 100.0, policy="fifo-backfill")
    assert plain[2].start == 200.0 and plain[3].start == 300.0  # (submit order)
    # alice: 100 GPU-seconds so far (her running job) plus 5,000 of ended jobs
    fair = predict(pending, running, gpus(1), 100.0, policy="fifo-backfill",
                   usage={"alice": 5100.0}, half_life=float("inf"))  # fmt: skip
    assert fair[3].start == 200.0 and fair[2].start == 300.0


def test_a_user_at_the_gpu_limit_is_predicted_after_their_running_jobs() -> None:
    pending, running = _queue()
    p = predict(pending, running, gpus(2), 100.0, policy="fifo-backfill",
                limits=UserLimits({"alice": 1.0}))  # fmt: skip
    assert p[3].start == 100.0  # bob takes the free GPU at once
    assert p[2].start == 200.0  # alice waits for her running job: her limit, not the GPUs
