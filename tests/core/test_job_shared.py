"""A pending job's lists and ``extra`` are shared with other jobs until it changes (issue 35:
the daemon's memory, berth/core/job.py): a change to one job never shows in another, and a
shared list or extra refuses to change in place (a missed copy fails loudly, never silently
changes the other jobs)."""

from __future__ import annotations

import copy

import pytest

from berth.core.job import NO_ATTEMPTS, Job, Shared, SharedExtra
from berth.core.states import State
from berth.core.transition import hold, transition, unstart


def test_jobs_submitted_together_share_their_history_until_one_changes() -> None:
    a, b = Job(1, 100.0), Job(2, 100.0)
    assert a.history is b.history and a.attempts is b.attempts is NO_ATTEMPTS
    assert [(e.at, e.state, e.detail) for e in a.history] == [(100.0, State.PENDING, "submitted")]
    transition(a, State.RUNNING, now=105.0, gpus=(0,))
    hold(b, now=106.0)
    assert [e.detail for e in a.history] == ["submitted", "on GPU 0"]
    assert [e.detail for e in b.history] == ["submitted", "held by user"]
    assert len(a.attempts) == 1 and b.attempts == [] and NO_ATTEMPTS == []
    unstart(a, now=107.0, reason="disk full")
    assert a.attempts == [] and a.state is State.PENDING
    assert Job(3, 101.0).history[0].at == 101.0  # (another time: its own event)


def test_a_shared_list_or_extra_refuses_to_change_in_place() -> None:
    job = Job(1, 100.0)
    with pytest.raises(TypeError, match="share"):
        job.history.append(job.history[0])
    with pytest.raises(TypeError, match="share"):
        job.attempts.append(None)  # type: ignore[arg-type]
    extra = SharedExtra({"bytes": 10})
    with pytest.raises(TypeError, match="share"):
        extra["x"] = 1
    with pytest.raises(TypeError, match="share"):
        extra.pop("bytes")
    assert isinstance(job.history, Shared) and copy.deepcopy(job).history == job.history
