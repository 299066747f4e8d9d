"""The engine's table of unfinished jobs keeps each user's count as jobs come and go."""

from __future__ import annotations

import pytest

from berth.core.job import Job, Request
from berth.daemon.engine.jobtable import JobTable


def _job(job_id: int, uid: int) -> Job:
    return Job(id=job_id, submit_time=0.0, request=Request(gpus=1), user=f"u{uid}", uid=uid)


def test_counts_follow_inserts_deletes_and_pops() -> None:
    t = JobTable()
    t[1], t[2], t[3] = _job(1, 1000), _job(2, 1000), _job(3, 1001)
    assert (t.count_of(1000), t.count_of(1001), t.count_of(7)) == (2, 1, 0)
    del t[1]
    assert t.pop(3) is not None and t.pop(3, None) is None
    assert (t.count_of(1000), t.count_of(1001)) == (1, 0)
    t[2] = _job(2, 1000)  # replaced, not added
    assert t.count_of(1000) == 1 and len(t) == 1
    with pytest.raises(KeyError):
        t.pop(99)
    with pytest.raises(TypeError):
        t.update({})


def test_jobs_alike_share_one_name_and_request() -> None:
    t = JobTable()
    a, b = _job(1, 1000), _job(2, 1000)
    b.name = "".join(["tr", "ue"])  # equal to a's, another object
    a.name = "true"
    assert a.request is not b.request and a.name is not b.name
    t[1], t[2] = a, b
    assert b.request is a.request and b.name is a.name
    c = _job(3, 1000)
    c.request = Request(gpus=2)
    t[3] = c
    assert c.request is not a.request and c.request.gpus == 2


def test_each_projects_jobs_are_counted() -> None:
    t = JobTable()
    a, b = _job(1, 1000), _job(2, 1000)
    a.project = b.project = "vision"
    t[1], t[2], t[3] = a, b, _job(3, 1001)
    t[1] = a  # (put again: counted once)
    assert t.projects() == {"vision": 2}
    del t[1]
    assert t.projects() == {"vision": 1}
    t.projects()["vision"] = 9  # (a copy)
    assert t.projects() == {"vision": 1}
