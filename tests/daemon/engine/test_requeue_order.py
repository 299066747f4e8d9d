"""Acceptance (issue 10, point 3): a job requeued at its time limit (``--requeue``) goes to
the end of the queue: the jobs that were waiting when it was preempted run before it again,
whatever the policy thinks of its short time limit. Three jobs on one GPU, through the CLI."""

from __future__ import annotations

import pytest
from helpers import wait_until


@pytest.mark.parametrize("policy", ["balanced", "sjf", "guarded"])
def test_requeued_job_runs_again_only_after_the_jobs_that_waited(daemon, policy):
    daemon.fake.setup(n=1, memory="80G")
    daemon.start("--kill-after", "0.2", "--policy", policy, gpus=None)

    def submit(*args: str) -> int:
        out = daemon.berth("submit", "--parsable", *args)
        assert out.returncode == 0, out.stderr
        return int(out.stdout.strip())

    # R: a short time limit, requeued; its first attempt outlives the limit, the second ends.
    script = '[ "$BERTH_ATTEMPT" -ge 2 ] || exec sleep 60'
    r = submit("--time-limit", "1.5", "--requeue", "-J", "r", "--wrap", script)
    wait_until(lambda: daemon.job(r)["state"] == "RUNNING", timeout=10, message="R runs")
    # A and B wait while R runs. A runs longer than a second: the daemon re-sorts the queue
    # (balanced's urgencies move with the clock) before B or R starts.
    a = submit("-J", "a", "--wrap", "sleep 1.5")
    b = submit("-J", "b", "--wrap", "sleep 0.5")
    rows = daemon.wait_done([r, a, b], timeout=30)
    assert {i: rows[i]["state"] for i in (r, a, b)} == {r: "COMPLETED", a: "COMPLETED",
                                                        b: "COMPLETED"}  # fmt: skip
    attempts = {i: daemon.job(i)["attempts"] for i in (r, a, b)}
    assert [x["outcome"] for x in attempts[r]] == ["PREEMPTED", "COMPLETED"]
    starts = sorted(
        (x["start"], f"{name}{x['number']}")
        for name, i in (("r", r), ("a", a), ("b", b))
        for x in attempts[i]
    )
    assert [s for _, s in starts] == ["r1", "a1", "b1", "r2"]
