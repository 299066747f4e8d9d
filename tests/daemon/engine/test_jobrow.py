"""One job row (issue 38 step 3): the rows the daemon answers (the queue view's, `wait`'s) have
exactly the keys berth/wire/jobrow.py declares, read back by the local backend through it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from enginekit import EngineRig

from berth.backends.local import info
from berth.daemon.engine.front import Front
from berth.daemon.requests.queueview import Select
from berth.wire.jobrow import ALL_FIELDS, FIELDS, JobRow


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[EngineRig]:
    r = EngineRig(tmp_path, gpus=1)
    try:
        yield r
    finally:
        r.close()


def _rows(front: Front, **req: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for frame in front.queue(Select(req), lambda job: True):
        rows += frame.get("jobs", [])
    return rows


def test_every_row_of_the_queue_view_is_a_declared_job_row(rig: EngineRig) -> None:
    running = rig.submit("sleep", "60")
    pending = rig.submit("true", gpus=1)
    array = rig.submit("true", array="0-2")
    rig.turn()
    assert rig.state(running) == "RUNNING" and rig.state(pending) == "PENDING"
    front = Front(rig.engine)
    rows = _rows(front, model=True) + _rows(front, fold=True)
    assert {r["id"] for r in rows} >= {running, pending, array}
    for r in rows:
        assert set(FIELDS) <= set(r) <= set(ALL_FIELDS), sorted(set(r) - set(ALL_FIELDS))
        assert JobRow.from_dict(r).to_dict() == r  # (the keys and values as they came)
    folded = [r for r in rows if r.get("array_tasks")]
    assert folded and all(r["order"] is not None for r in folded)


def test_the_local_backend_reads_a_row_through_the_declaration(rig: EngineRig) -> None:
    job = rig.submit("true", gpus=0.5, hold=True)
    row = _rows(Front(rig.engine))[0]
    got = info(row)
    assert (got.id, got.state, got.gpus) == (str(job), "PENDING", "0.5")
    assert got.extra["raw_id"] == str(job) and got.extra["priority"] == row["priority"]
    with pytest.raises(TypeError, match="unknown field 'nope'"):
        JobRow(**{**row, "nope": 1})
    older = {k: v for k, v in row.items() if k != "depends_on"}  # (an older daemon's row)
    assert JobRow.from_dict(older).depends_on is None
