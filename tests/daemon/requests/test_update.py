"""`berth update` (issue 24.3): a pending job's -g, -t, -p, -J and --dependency changed through
the real CLI, each change a line of its history that `berth show` prints; what submit refuses
refused here too, and a running job refused by name; an array's id changes its pending tasks,
``12_3`` one task; the pass that follows starts a job the change lets fit."""

from __future__ import annotations

import json
from typing import Any

from helpers import wait_until


def _submit(daemon: Any, *args: str) -> int:
    out = daemon.berth("submit", "--parsable", *args)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[0].split(";")[0])


def _state(daemon: Any, job_id: int) -> str:
    return str(daemon.job(job_id)["state"])


def test_each_field_changes_and_show_prints_the_journal(daemon: Any) -> None:
    daemon.start()
    first = _submit(daemon, "--hold", "--", "true")
    job = _submit(daemon, "--hold", "-J", "one", "--", "true")
    said = daemon.berth("update", str(job), "-g", "2", "-t", "90", "-p", "3", "-J", "two",
                        "--dependency", f"afterok:{first}")  # fmt: skip
    assert said.returncode == 0, said.stderr
    assert said.stdout.splitlines() == [
        f"job {job}: updated: gpus 1 -> 2 by root",
        f"job {job}: updated: time limit none -> 1:30:00 by root",  # (-t 90: minutes)
        f"job {job}: updated: priority 0 -> 3 by root",
        f"job {job}: updated: name one -> two by root",
        f"job {job}: updated: dependencies none -> afterok:{first} by root",
    ]
    j = daemon.job(job)
    assert (j["request"]["gpus"], j["time_limit"], j["priority"], j["name"]) == (2, 5400, 3, "two")
    assert j["dependencies"] == [f"afterok:{first}"] and j["held"]
    shown = daemon.berth("show", str(job)).stdout
    for line in said.stdout.splitlines():  # each with its time
        assert any(s.endswith(line.split(": ", 1)[1]) and s.strip()[:4].isdigit()
                   for s in shown.splitlines()), (line, shown)  # fmt: skip
    again = daemon.berth("update", str(job), "-p", "3")
    assert again.stdout == f"job {job}: nothing to change (it already has those values)\n"
    cleared = daemon.berth("update", str(job), "--dependency", "")
    assert cleared.returncode == 0 and daemon.job(job)["dependencies"] == []
    later = _submit(daemon, "--begin", "now+1h", "--", "true")  # (PENDING BeginTime: may change)
    assert daemon.berth("update", str(later), "-t", "5").returncode == 0
    assert daemon.job(later)["time_limit"] == 300 and daemon.job(later)["not_before"]
    # The change is durable: a restarted daemon has it.
    daemon.stop()
    daemon.start()
    assert daemon.job(job)["name"] == "two" and daemon.job(job)["request"]["gpus"] == 2


def test_what_submit_refuses_is_refused_and_changes_nothing(daemon: Any) -> None:
    daemon.start("--max-job-time", "1h")
    job = _submit(daemon, "--hold", "--", "true")
    before = daemon.job(job)
    for args, code, words in (
        (["-g", "5"], 2, "-g 5: this machine has 4 GPU(s); ask for fewer"),
        (["-g", "0"], 2, "-g 0: a pending job keeps GPUs or none as it was submitted"),
        (["-g", "two"], 2, "job field 'gpus'"),
        (["-t", "2h"], 2, "-t 2:00:00 is more than this daemon allows"),
        (["-t", "soon"], 2, "-t/--time"),
        (["--dependency", "afterok:9999"], 2, "no job 9999"),
        (["--dependency", f"afterok:{job}"], 2, f"job {job} would wait for itself"),
        ([], 2, "nothing to change"),
    ):
        out = daemon.berth("update", str(job), *args)
        assert (out.returncode, words in out.stderr) == (code, True), (args, out.stderr)
    assert daemon.job(job) == before
    failed = _submit(daemon, "--", "false")
    daemon.wait_done([failed])
    never = daemon.berth("update", str(job), "--dependency", f"afterok:{failed}")
    assert never.returncode == 1 and f"job {failed} ended FAILED" in never.stderr
    assert daemon.berth("update", "9999", "-p", "1").returncode == 2


def test_a_running_job_is_refused_by_name_with_what_to_do(daemon: Any) -> None:
    daemon.start()
    job = _submit(daemon, "--", *daemon.workload("--seconds", "60"))
    wait_until(lambda: _state(daemon, job) == "RUNNING", timeout=20, message="it runs")
    out = daemon.berth("update", str(job), "-t", "10")
    assert out.returncode == 1, out.stderr
    assert f"job {job} is RUNNING: only a pending job can be updated" in out.stderr
    assert f"`berth resubmit {job}`" in out.stderr
    assert daemon.job(job)["time_limit"] is None


def test_the_pass_after_an_update_starts_a_job_that_now_fits(daemon: Any) -> None:
    daemon.start()
    blocker = _submit(daemon, "-g", "1", "--", *daemon.workload("--seconds", "60"))
    wait_until(lambda: _state(daemon, blocker) == "RUNNING", timeout=20, message="it runs")
    job = _submit(daemon, "-g", "4", "--", "true")
    row = next(r for r in daemon.call("queue")["jobs"] if r["id"] == job)
    assert row["state"] == "PENDING" and row["reason"] == "Resources"
    assert daemon.berth("update", str(job), "-g", "2").returncode == 0
    assert daemon.wait_done([job], timeout=20)[job]["state"] == "COMPLETED"


def test_an_arrays_id_changes_its_pending_tasks_and_a_tasks_id_that_task(daemon: Any) -> None:
    daemon.start()
    out = daemon.berth("submit", "--json", "--array", "0-2", "-g", "4", "--",
                       *daemon.workload("--seconds", "60"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    head = int(json.loads(out.stdout)["job_id"])
    wait_until(lambda: _state(daemon, head) == "RUNNING", timeout=20, message="task 0 runs")
    one = daemon.berth("update", f"{head}_2", "-p", "7")
    assert one.stdout == f"job {head}_2: updated: priority 0 -> 7 by root\n", one.stderr
    assert [daemon.job(head + k)["priority"] for k in range(3)] == [0, 0, 7]
    every = daemon.berth("update", str(head), "-t", "10")
    assert every.returncode == 0, every.stderr
    assert sorted(every.stdout.splitlines()) == [
        f"job {head}_{k}: updated: time limit none -> 10:00 by root" for k in (1, 2)
    ]  # (task 0 runs: it keeps what it started with)
    assert [daemon.job(head + k)["time_limit"] for k in range(3)] == [None, 600, 600]
    running = daemon.berth("update", f"{head}_0", "-t", "10")
    assert running.returncode == 1 and f"job {head}_0 is RUNNING" in running.stderr


def test_dependency_takes_submits_expressions_and_refuses_one_never_met(daemon: Any) -> None:
    """--dependency takes what submit's does (any-of '?', afterany, @), shown as written in
    queue --json; one that could never be met (afternotok on a job that COMPLETED) is refused
    and changes nothing."""
    daemon.start()
    done = _submit(daemon, "--", "true")
    wait_until(lambda: _state(daemon, done) == "COMPLETED")
    other = _submit(daemon, "--hold", "--", "true")
    job = _submit(daemon, "--hold", "--", "true")
    said = daemon.berth("update", str(job), "--dependency", f"afternotok:{other}?afterany:{done}")
    assert said.returncode == 0, said.stderr
    rows = json.loads(daemon.berth("queue", "--json").stdout)["jobs"]
    row = next(r for r in rows if r["id"] == job)
    assert row["dependency"] == f"afternotok:{other}?afterany:{done}"
    never = daemon.berth("update", str(job), "--dependency", f"afternotok:{done}")
    assert never.returncode != 0
    assert f"afternotok:{done}" in never.stderr and "never be met" in never.stderr
    assert "nothing was changed" in never.stderr
    row = next(r for r in json.loads(daemon.berth("queue", "--json").stdout)["jobs"]
               if r["id"] == job)  # fmt: skip
    assert row["dependency"] == f"afternotok:{other}?afterany:{done}"
    last = daemon.berth("update", str(job), "--dependency", "afterok:@")  # @: the newest, itself
    assert last.returncode != 0 and "wait for itself" in last.stderr, last.stderr
