"""docs/simulate.md, "A trace is read strictly ... The same holds for ... berth's own records
(`line N`, or `row N` of the store)": a daemon's store with one row that is not a job is an
error naming the store and the row, exit 2, and nothing is replayed (no table printed)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from berth.cli.main import main
from berth.core import Job, Request, State, transition


def _job(i: int) -> str:
    j = Job(id=i, submit_time=10.0 * i, request=Request(gpus=1), user="bo", time_limit=600.0)
    transition(j, State.RUNNING, now=10.0 * i + 1, gpus=(0,))
    transition(j, State.COMPLETED, now=10.0 * i + 100, exit_code=0)
    return json.dumps(j.to_dict())


@pytest.mark.parametrize("bad", ['{"id": 2, "submit_time": "soon"}', "not json", "[]"])
def test_a_bad_row_of_the_store_is_named_and_nothing_is_replayed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    store = tmp_path / "berth.db"
    db = sqlite3.connect(store)
    db.execute("CREATE TABLE jobs(id INTEGER PRIMARY KEY, data TEXT NOT NULL)")
    db.executemany("INSERT INTO jobs VALUES (?, ?)", [(1, _job(1)), (2, bad), (3, _job(3))])
    db.commit()
    db.close()
    code = main(["simulate", str(store), "--inventory", "2", "--time-limits", "keep"])
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert str(store) in err and "row 2" in err, err
    assert "JCT" not in out and out.strip() == "", out  # (nothing replayed)
