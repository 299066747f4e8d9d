"""`berth update`'s core (:func:`berth.core.change.change`): a pending job changed in place,
each change a line of its history; a running job, or a request the job model refuses, left
as it was."""

from __future__ import annotations

import json

import pytest

from berth.core import Dependency, IllegalTransition, Job, Request, State, transition
from berth.core.change import change
from berth.errors import UsageError


def test_each_change_is_a_line_of_the_history_and_survives_the_store() -> None:
    job = Job(1, 100.0, Request(gpus=1), name="a")
    said = change(job, now=200.0, by="alice", gpus=2, time_limit=90.0, priority=3, name="b",
                  dependencies=(Dependency("afterok", 7),))  # fmt: skip
    assert said == [
        "updated: gpus 1 -> 2 by alice",
        "updated: time limit none -> 1:30 by alice",
        "updated: priority 0 -> 3 by alice",
        "updated: name a -> b by alice",
        "updated: dependencies none -> afterok:7 by alice",
    ]
    assert [(e.at, e.state, e.detail) for e in job.history[1:]] == [
        (200.0, State.PENDING, line) for line in said
    ]
    back = Job.from_dict(json.loads(json.dumps(job.to_dict())))
    assert (back.request.gpus, back.time_limit, back.priority, back.name) == (2, 90.0, 3, "b")
    assert back.dependencies == (Dependency("afterok", 7),)
    assert change(job, now=300.0, by="alice", gpus=2, priority=3) == []  # nothing new
    assert len(job.history) == 6


def test_a_refused_change_changes_nothing() -> None:
    job = Job(1, 100.0, Request(gpus=1, gpu_ids=(0, 1)), priority=1)
    with pytest.raises(UsageError, match="asked for 3 GPUs but allowed only"):
        change(job, now=200.0, by="alice", gpus=3, priority=5)
    assert (job.request.gpus, job.priority, len(job.history)) == (1, 1, 1)
    transition(job, State.RUNNING, now=300.0, gpus=(0,))
    with pytest.raises(IllegalTransition, match="job 1 is RUNNING: only a pending job"):
        change(job, now=400.0, by="alice", priority=5)
    assert job.priority == 1
