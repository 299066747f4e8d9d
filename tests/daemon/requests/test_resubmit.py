"""`berth resubmit` (issue 24.3): an ended job queued again with a new id and the same spec,
`berth show` saying where it came from; ``--cascade`` also its dependents that were cancelled
because it failed, their dependencies rewritten onto the new ids. And who may: another
user's job is refused to update and resubmit; a priority above the user's own highest is
for admins (needs root, to act as other users, as CI runs the suite)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from userkit import A, B, berth_as, ensure_users, request_as


def _submit(daemon: Any, *args: str) -> int:
    out = daemon.berth("submit", "--parsable", *args)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[0])


def test_resubmit_queues_the_same_spec_under_a_new_id(daemon: Any) -> None:
    daemon.start()
    mark = os.path.join(daemon.sockdir, "runs")
    job = _submit(daemon, "-J", "again", "-t", "5", "--wrap", f"echo run >> {mark}")
    assert daemon.wait_done([job])[job]["state"] == "COMPLETED"
    pending = _submit(daemon, "--hold", "--", "true")
    refused = daemon.berth("resubmit", str(pending))
    assert refused.returncode == 1 and f"job {pending} is PENDING" in refused.stderr
    assert "`berth update` changes a pending one" in refused.stderr
    out = daemon.berth("resubmit", str(job))
    assert out.returncode == 0, out.stderr
    new = int(out.stdout.split()[-1])
    assert out.stdout == f"job {job} resubmitted as job {new}\n" and new > pending
    assert daemon.wait_done([new])[new]["state"] == "COMPLETED"
    old, again = daemon.job(job), daemon.job(new)
    for key in ("name", "time_limit", "request", "command", "cwd", "user", "uid", "priority"):
        assert again[key] == old[key], key
    assert again["stdout"].endswith(f"{new}.out")  # (its own log: %j is the new id)
    with open(mark) as f:
        assert f.read() == "run\nrun\n"
    assert again["history"][0]["detail"] == f"resubmitted from {job} by root"
    assert f"resubmitted from job {job}" in daemon.berth("show", str(new)).stdout


def test_cascade_resubmits_the_dependents_its_failure_cancelled(daemon: Any) -> None:
    daemon.start()
    mark = os.path.join(daemon.sockdir, "failed-once")
    flaky = _submit(daemon, "--wrap", f"test -e {mark} || {{ touch {mark}; exit 1; }}")
    child = _submit(daemon, "--dependency", f"afterok:{flaky}", "--", "true")
    grandchild = _submit(daemon, "--dependency", f"afterok:{child}", "--", "true")
    other = _submit(daemon, "--", "false")  # (failed too, but nobody's dependent: left alone)
    done = daemon.wait_done([flaky, child, grandchild, other])
    assert [done[i]["state"] for i in (flaky, child, grandchild)] == ["FAILED", "CANCELLED",
                                                                      "CANCELLED"]  # fmt: skip
    alone = daemon.berth("resubmit", str(child))  # (without --cascade: only that job)
    assert alone.returncode == 0, alone.stderr
    out = daemon.berth("resubmit", str(flaky), "--cascade")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()  # (in dependency order; `other` is no dependent of it)
    assert [line.split()[1] for line in lines] == [str(flaky), str(child), str(grandchild)]
    new = {int(line.split()[1]): int(line.split()[-1]) for line in lines}
    assert daemon.job(new[child])["dependencies"] == [f"afterok:{new[flaky]}"]
    assert daemon.job(new[grandchild])["dependencies"] == [f"afterok:{new[child]}"]
    ended = daemon.wait_done(list(new.values()))
    assert all(r["state"] == "COMPLETED" for r in ended.values()), ended


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")
def test_only_the_owner_or_an_admin_updates_and_resubmits(daemon: Any) -> None:
    ensure_users()
    daemon.start()
    os.chmod(daemon.sockdir, 0o755)
    os.chmod(daemon.socket, 0o666)
    spec = {"argv": ["true"], "env": {"PATH": "/usr/bin:/bin"}, "cwd": "/", "hold": True,
            "stdout": "/dev/null", "priority": 2}  # fmt: skip
    low = request_as(A, daemon.socket, "submit", job={**spec, "priority": 0})["ok"]["job_id"]
    job = request_as(A, daemon.socket, "submit", job=spec)["ok"]["job_id"]
    theirs = berth_as(B, "update", str(job), "-t", "5")
    assert theirs.returncode == 4, theirs.stderr
    assert f"job {job} belongs to {A}; only {A} or an admin" in theirs.stderr
    assert berth_as(B, "resubmit", str(job)).returncode == 4
    # A reorders their own jobs up to their highest priority (2), not above it.
    assert berth_as(A, "update", str(low), "-p", "2").returncode == 0
    above = berth_as(A, "update", str(low), "-p", "3")
    assert above.returncode == 4 and f"above {A}'s own highest priority (2" in above.stderr
    assert berth_as(A, "update", str(job), "-p", "-5").returncode == 0  # lowering: always
    assert daemon.berth("update", str(low), "-p", "100").returncode == 0  # root: an admin
    assert [daemon.job(i)["priority"] for i in (low, job)] == [100, -5]
    assert "updated: priority 2 -> 100 by root" in daemon.berth("show", str(low)).stdout
