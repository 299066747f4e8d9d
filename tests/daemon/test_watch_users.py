"""Two users watch one shared jobs file (docs/jobs-file.md, `berth watch`): each line is queued
once for each of them. A line's key (the file and the line) is the same for both, so the
daemon must keep it per user: another user's line already queued is no answer for yours
(it would leave your line never queued, and hand you their job and its log's path)."""

from __future__ import annotations

import os
from pathlib import Path

from userkit import A, B, berth_as, ensure_users, passwd


def test_a_shared_watched_file_queues_each_line_for_each_user(daemon) -> None:
    ensure_users()
    daemon.start(gpus=1)
    os.chmod(daemon.sockdir, 0o755)
    os.chmod(daemon.socket, 0o666)
    shared = Path(daemon.sockdir) / "lab"
    shared.mkdir()
    shared.chmod(0o1777)
    jobs = shared / "jobs.txt"
    jobs.write_text("-J first -o /dev/null -- true\n-J second -o /dev/null -- true\n")
    jobs.chmod(0o644)
    said = {}
    for user in (A, B, A):  # (A again: its own lines are not queued twice)
        r = berth_as(user, "watch", str(jobs), "--scan", "--hold",
                     "--state", str(shared / f"{user}.json"))  # fmt: skip
        assert r.returncode == 0, (user, r.stdout, r.stderr)
        said[user] = r.stdout
    rows = daemon.call("queue", all=True)["jobs"]
    mine = {u: sorted(r["name"] for r in rows if r["uid"] == passwd(u).pw_uid) for u in (A, B)}
    assert mine == {A: ["first", "second"], B: ["first", "second"]}, (rows, said)
    assert len(rows) == 4


def test_unique_finds_only_the_callers_own_twin(daemon) -> None:
    """`--unique` (the GPU Job Scheduler's deduplication) skips a job *you* queued already:
    another user's identical job neither stops yours nor is handed to you."""
    ensure_users()
    daemon.start(gpus=1)
    os.chmod(daemon.sockdir, 0o755)
    os.chmod(daemon.socket, 0o666)
    args = ("submit", "--parsable", "--unique", "--hold", "-J", "same", "-D", "/",
            "-o", "/dev/null", "--", "true")  # fmt: skip
    first = berth_as(A, *args)
    theirs = berth_as(B, *args)
    again = berth_as(A, *args)
    assert first.returncode == 0 and theirs.returncode == 0, (first.stderr, theirs.stderr)
    assert theirs.stdout.strip() != first.stdout.strip(), (theirs.stdout, theirs.stderr)
    assert again.stdout.strip() == first.stdout.strip(), (again.stdout, again.stderr)
    rows = daemon.call("queue", all=True)["jobs"]
    assert sorted(r["uid"] for r in rows) == sorted(passwd(u).pw_uid for u in (A, B))
