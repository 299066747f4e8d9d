"""`berth queue` of a long queue (issue 21): a screenful on a terminal and a line that counts
the rest, every job to a pipe; the daemon explains only the lines it sends, counts the rest
exactly, folds an array's pending tasks into one line however far they reach, and streams
`--json` in frames that make the same document as one answer."""

from __future__ import annotations

import json
import sys

import pytest
from helpers import wait_until
from termkit import on_terminal

from berth.client import DaemonError
from berth.daemon.engine.queue_view import CHUNK


def _blocked(daemon, n: int) -> tuple[int, list[int]]:  # type: ignore[no-untyped-def]
    """One GPU taken by a running job, and ``n`` jobs waiting for it (Resources)."""
    daemon.start(gpus=1)
    blocker = daemon.submit("sleep", "60")
    wait_until(lambda: daemon.job(blocker)["state"] == "RUNNING", message="blocker runs")
    spec = {"argv": ["true"], "env": daemon.env, "cwd": str(daemon.fake.root)}
    replies = daemon.call("submit_all", jobs=[spec] * n)["replies"]
    return blocker, [int(r["job_id"]) for r in replies]


def _on_terminal(daemon, *args: str, rows: int = 20) -> str:  # type: ignore[no-untyped-def]
    """`berth queue ARGS` with its stdout a terminal of ``rows`` lines."""
    code, out = on_terminal(
        [sys.executable, "-m", "berth.cli.main", "queue", *args], daemon.env, rows, 200
    )
    assert code == 0, out
    return out


def _is_job(line: str) -> bool:
    return line.split()[0].isdigit() and " more " not in line


def test_a_terminal_gets_a_screenful_and_a_count_of_the_rest(daemon):
    blocker, ids = _blocked(daemon, 40)
    out = _on_terminal(daemon, rows=20)
    lines = out.splitlines()
    jobs = [ln for ln in lines if _is_job(ln)]
    assert len(jobs) == 20 - 4  # the screen less the header, the last line and the prompt
    assert int(jobs[0].split()[0]) == blocker
    assert [int(ln.split()[0]) for ln in jobs[1:]] == ids[:15]  # in line, each explained
    assert all("(Resources)" in ln for ln in jobs[1:])
    assert lines[-1] == "25 more pending (berth queue --limit 0 or | less for all)"
    piped = daemon.berth("queue")  # a pipe: every job, as squeue, and no such line
    assert piped.returncode == 0, piped.stderr
    assert len([ln for ln in piped.stdout.splitlines() if _is_job(ln)]) == 41
    assert "more pending" not in piped.stdout
    every = _on_terminal(daemon, "--limit", "0", rows=20)  # asked for all
    assert len([ln for ln in every.splitlines() if _is_job(ln)]) == 41
    five = daemon.berth("queue", "-n", "5", "--noheader")
    assert five.stdout.splitlines()[-1].startswith("36 more pending (")
    assert len(five.stdout.splitlines()) == 6
    bad = daemon.berth("queue", "-n", "-1")
    assert bad.returncode != 0 and "--limit -1" in bad.stderr
    daemon.call("cancel", job_ids=[blocker, *ids])


def test_the_daemon_explains_the_lines_it_sends_and_counts_the_rest(daemon):
    blocker, ids = _blocked(daemon, 30)
    daemon.call("hold", job_ids=ids[20:])
    head = daemon.call("queue", limit=6)
    rows = head["jobs"]
    assert [r["id"] for r in rows] == [blocker, *ids[:5]]
    assert all(r["reason"] == "Resources" and r["reason_detail"] for r in rows[1:])
    assert [r["order"] for r in rows[1:]] == [1, 2, 3, 4, 5]
    assert head["left"] == {"PENDING": 25}  # exact, without explaining them
    assert {r["id"] for r in daemon.call("queue", limit=3, states=["PD"])["jobs"]} == set(ids[:3])
    assert daemon.call("queue", limit=3, states=["PD"])["left"] == {"PENDING": 27}
    assert daemon.call("queue", limit=0)["left"] == {"RUNNING": 1, "PENDING": 30}
    # a job further down still has its reason when asked for (the pass runs again, further)
    assert daemon.job(ids[-1])["reason"].startswith("Held")
    assert daemon.job(ids[15])["reason"].startswith("Resources")
    whole = daemon.call("queue")
    assert [r["id"] for r in whole["jobs"]] == [blocker, *ids]
    assert "left" not in whole
    with pytest.raises(DaemonError, match="limit = -2"):
        daemon.call("queue", limit=-2)
    daemon.call("cancel", job_ids=[blocker, *ids])


def test_an_array_folds_into_one_line_however_far_its_tasks_reach(daemon):
    blocker, before = _blocked(daemon, 2)
    out = daemon.berth("submit", "--parsable", "--array", "0-59%2", "--", "true")
    array = int(out.stdout.split(";")[0].split("_")[0])
    after = daemon.call("submit", job={"argv": ["true"], "env": daemon.env,
                                       "cwd": str(daemon.fake.root)})["job_id"]  # fmt: skip
    shown = daemon.berth("queue", "-n", "5", "--noheader").stdout.splitlines()
    assert [ln.split()[0] for ln in shown[:5]] == [
        str(blocker), str(before[0]), str(before[1]), f"{array}_[0-59%2]", str(after)
    ]
    assert len(shown) == 5  # the 60 tasks are one line, and nothing is left out
    expanded = daemon.berth("queue", "-n", "5", "-r", "--noheader").stdout.splitlines()
    assert [ln.split()[0] for ln in expanded[3:5]] == [f"{array}_0", f"{array}_1"]
    assert expanded[-1].startswith("59 more pending")
    tree = daemon.berth("queue", "--tree", "--project", "none-such")
    assert tree.returncode == 0, tree.stderr
    daemon.call("cancel", job_ids=[blocker, *before, array, after])


def test_json_streamed_in_frames_is_the_document_of_one_answer(daemon):
    daemon.start()
    n = CHUNK + 500  # more than one frame of rows
    spec = {"argv": ["true"], "env": daemon.env, "cwd": str(daemon.fake.root), "hold": True}
    daemon.call("submit_all", jobs=[spec] * n)
    with daemon.client() as c:
        c.send("queue", all=False)
        raw = c.receive_raw()
        c.send("queue", stream=True)
        frames = [json.loads(c.receive_raw())]
        while "end" not in frames[-1]:
            frames.append(json.loads(c.receive_raw()))
    sizes = [len(f["jobs"]) for f in frames if "jobs" in f]
    assert sizes == [CHUNK, 500] and frames[0]["total"] == n
    out = daemon.berth("queue", "--json")
    assert out.returncode == 0, out.stderr
    assert out.stdout.encode() == b"{" + raw[len(b'{"ok":true,') :] + b"\n"
    assert len(json.loads(out.stdout)["jobs"]) == n
    mine = json.loads(daemon.berth("queue", "--json", "--project", "none-such").stdout)
    assert mine["jobs"] == [] and "users" in mine
