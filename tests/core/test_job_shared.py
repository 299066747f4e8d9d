"""A pending job's lists and ``extra`` are shared with other jobs until it changes (issue 35:
the daemon's memory, berth/core/job.py): a change to one job never shows in another, and a
shared list or extra refuses to change in place (a missed copy fails loudly, never silently
changes the other jobs)."""

from __future__ import annotations

import copy
import json

import pytest

from berth.core.job import NO_ATTEMPTS, Job, Shared, SharedExtra, TaskExtra
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


def test_an_array_tasks_extra_reads_as_its_dict_and_changes_only_its_job() -> None:
    common = SharedExtra({"script": "train.py", "bytes": 256})
    whole = {"script": "train.py", "bytes": 256, "array": [10, 7]}
    t = TaskExtra(common, 10, 7)
    assert t == whole and whole == t and dict(t) == whole and {**t} == whole
    assert t["array"] == [10, 7] and t.get("array") == [10, 7] and "array" in t and t.get("x") is None
    assert list(t) == list(whole) and len(t) == 3 and t.items() == whole.items()
    assert {"bytes", "lease"} & t.keys() == {"bytes"} and repr(t) == repr(whole)
    for change in (lambda: t.update(x=1), lambda: t.pop("bytes"), lambda: t.setdefault("x", 1)):
        with pytest.raises(TypeError):
            change()
    with pytest.raises(TypeError):
        t["x"] = 1
    a, b = Job(11, 1.0, extra=t), Job(12, 1.0, extra=TaskExtra(common, 10, 8))
    assert json.loads(json.dumps(a.to_dict()))["extra"] == whole  # (the store's row: whole)
    assert Job.from_dict(a.to_dict()).extra == whole  # (read back after a restart)
    a.note("lease", "L1")
    assert type(a.extra) is dict and a.extra == {**whole, "lease": "L1"}
    assert b.extra == {"script": "train.py", "bytes": 256, "array": [10, 8]}  # (untouched)
    assert common == {"script": "train.py", "bytes": 256}
    assert copy.deepcopy(b).extra == b.extra
