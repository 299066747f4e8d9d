"""Issue 33.4: backfill by predicted run times (``Inputs.predicted``, `[scheduling] predict`):
EASY's shadow time and a backfill's "ends before it" read a job's prediction where it gives
no time limit; no stop and no wakeup ever rests on a prediction."""

from __future__ import annotations

import pytest

from berth.core import Inputs, Job, Request, State, schedule, transition

from .conftest import gpus


def _job(i: int, gpus: float, name: str = "") -> Job:
    return Job(id=i, submit_time=float(i), request=Request(gpus=gpus), name=name)


def _queue() -> tuple[Job, Job, Job, Job]:
    """2 GPUs: one runs a job without a limit; a 2-GPU job waits (the head, reserving);
    behind it a short and a long job, neither with a limit."""
    running = _job(1, 1, "long")
    transition(running, State.RUNNING, now=0.0, gpus=(0,))
    return running, _job(2, 2), _job(3, 1, "short"), _job(4, 1, "long")


PRED = {"short": 50.0, "long": 1000.0}


def _predicted(job: Job) -> float | None:
    return PRED.get(job.name)


@pytest.mark.parametrize("policy", ["balanced", "fifo-backfill", "sjf"])
def test_a_job_predicted_to_end_before_the_shadow_time_backfills(policy: str) -> None:
    running, head, short, long_ = _queue()
    base = Inputs([head, short, long_], [running], gpus(2), now=100.0, policy=policy)
    # Limits only: nobody knows when the running job ends; the free GPU is kept for the head.
    d = schedule(base)
    assert not d.starts and d.wakeup is None
    # By prediction: the running job ends at 1000 (its start + 1000); the short one (50 s)
    # ends before then, the long one (1000 s) would not.
    d = schedule(base._replace(predicted=_predicted))
    assert [s.job_id for s in d.starts] == [short.id]
    assert d.expected[head.id] == 1000.0
    assert d.wakeup is None and not d.cancels  # (no stop, no timer from a prediction)


def test_a_limit_still_wins_and_a_job_that_outran_its_prediction_is_not_stopped() -> None:
    running, head, short, long_ = _queue()
    short.time_limit = 2000.0  # a limit past the shadow time: it does not backfill
    d = schedule(Inputs([head, short, long_], [running], gpus(2), now=5000.0,
                        policy="fifo-backfill", predicted=_predicted))  # fmt: skip
    # The running job outran its prediction (1000 s at 5000): the pass ends nothing.
    assert not d.starts and not d.cancels and d.wakeup is None
    assert running.state is State.RUNNING
