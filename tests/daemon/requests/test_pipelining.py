"""Requests pipelined on one connection (issue 21): answered in the order they came, whatever
each is (a submit answered by its commit, an error, an answer in several frames, a ping), and
the answers that are ready together go in one write without changing that order."""

from __future__ import annotations

from typing import Any

import pytest

from berth.client import Client, DaemonError
from berth.daemon.requests.server import MAX_PIPELINE

MORE = MAX_PIPELINE + 72  # submits after the first four


def _job(**fields: Any) -> dict[str, Any]:
    return {"argv": ["true"], "env": {"PATH": "/usr/bin:/bin"}, "cwd": "/", "hold": True,
            **fields}  # fmt: skip


def test_answers_come_in_the_order_of_the_requests(daemon: Any) -> None:
    daemon.start()
    with Client(daemon.env["BERTH_SOCKET"], timeout=60) as c:
        c.send("submit", job=_job())
        c.send("submit", job=_job(gpus=99))  # refused: no such request fits here
        c.send("queue", all=True, stream=True)  # an answer in several frames
        c.send("ping")
        for _ in range(MORE):  # (more than the requests in hand at once: read as answers go)
            c.send("submit", job=_job())
        first = c.receive()["job_id"]
        with pytest.raises(DaemonError):
            c.receive()
        frames = [c.receive()]
        while "end" not in frames[-1]:
            frames.append(c.receive())
        listed = [r["id"] for f in frames for r in f.get("jobs", ())]
        assert "jobs" in c.receive()  # the ping's answer
        ids = [c.receive()["job_id"] for _ in range(MORE)]
        assert ids == list(range(first + 1, first + 1 + MORE))
        # (a streamed answer is made as it is written: it may list the submits read after it)
        assert listed[0] == first and set(listed) <= {first, *ids}
