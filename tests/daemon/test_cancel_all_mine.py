"""`berth cancel --all-mine` is linear in the jobs (issue 35.4): the client asked for the
whole queue twice and matched every id against every row (8,000 jobs 20 s; 100,000 never
finished). Now the local backend sends one request (the daemon cancels the caller's jobs),
and a list of ids is matched through an index of the rows. Counted, not timed."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import wait_until

from berth.backends import base, local
from berth.backends.local import Local

N = 1500


class Counted:
    """The requests a Local backend makes, by kind, and how often a row is matched to an id."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.kinds: list[str] = []
        self.matches = 0
        call, frames, named = Local._call, Local._frames, base.named

        def _call(me: Local, kind: str, **fields: Any) -> dict[str, Any]:
            self.kinds.append(kind)
            return call(me, kind, **fields)

        def _frames(me: Local, fields: dict[str, Any]) -> Any:
            self.kinds.append("queue")
            return frames(me, fields)

        def counted(job: base.JobInfo, job_id: str) -> bool:
            self.matches += 1
            return named(job, job_id)

        def names(job: base.JobInfo) -> tuple[str | None, ...]:
            self.matches += 1
            return (job.id, job.extra.get("raw_id"), job.array_job)

        monkeypatch.setattr(Local, "_call", _call)
        monkeypatch.setattr(Local, "_frames", _frames)
        monkeypatch.setattr(base, "named", counted)
        monkeypatch.setattr(local, "_names", names, raising=False)
        monkeypatch.setattr(local, "named", counted, raising=False)


def _held_array(daemon: Any, n: int) -> int:
    out = daemon.berth("submit", "--hold", "--parsable", "--array", f"0-{n - 1}", "--", "true")
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[0])


def test_cancel_all_mine_is_one_request(daemon: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from berth.cli import cancel

    daemon.start()
    first = _held_array(daemon, N)
    seen = Counted(monkeypatch)
    parser = argparse.ArgumentParser()
    cancel.add_arguments(parser)
    args = parser.parse_args(["--all-mine"])
    assert cancel.run(args) == 0
    assert seen.kinds == ["cancel"]  # no listing of the queue, no id matched to a row
    assert seen.matches == 0
    rows = daemon.call("queue", all=True)["jobs"]
    assert len(rows) == N and {r["state"] for r in rows} == {"CANCELLED"}
    assert min(r["id"] for r in rows) == first


def test_cancel_by_ids_matches_each_row_once(daemon: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    daemon.start()
    first = _held_array(daemon, N)
    ids = [f"{first}_{i}" for i in range(N)]
    seen = Counted(monkeypatch)
    done = Local(daemon.socket).cancel(ids)
    assert done == {i: "cancelled" for i in ids}
    assert seen.kinds == ["queue", "cancel"]  # the ids checked in one listing, one cancel
    assert seen.matches <= 2 * N  # (was N * N: every id against every row)


def test_cancel_all_mine_by_state_in_its_one_request(daemon: Any) -> None:
    """`--state` goes with it: only the pending job is cancelled, as the listing did."""
    daemon.start()
    running = daemon.submit("sleep", "60")
    held = daemon.submit("true", hold=True)
    wait_until(lambda: daemon.job(running)["state"] == "RUNNING", message="it runs")
    out = daemon.berth("cancel", "--all-mine", "--state", "PD")
    assert (out.returncode, out.stdout) == (0, f"job {held}: cancelled\n"), out.stderr
    assert daemon.job(running)["state"] == "RUNNING"
    bad = daemon.berth("cancel", "--all-mine", "--state", "XX")
    assert bad.returncode == 2 and "XX" in bad.stderr
    assert daemon.berth("cancel", "--all-mine").stdout == f"job {running}: terminating\n"
