"""`berth watch FILE` (the GPU Job Scheduler's watched jobs.txt): lines appended while it runs are queued
once each, by content, whatever happens to the file (rewritten, reordered, truncated), to the
daemon (restarted) or to the watcher (killed, even between the daemon's answer and its own
note of it) (issue 12.2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from helpers import wait_until


def _names(daemon) -> list[str]:
    return sorted(r["name"] for r in daemon.call("queue", all=True)["jobs"])


def _watch(daemon, jobs, state) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "watch", str(jobs), "--interval", "0.05",
         "--state", str(state), "--hold"],
        env=daemon.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    return out + "\n" + err


def _until(daemon, names: list[str], state=None) -> None:
    """The queue holds these jobs (and the watcher has noted them: a job is in the queue a
    moment before the daemon's answer reaches the watcher)."""
    wait_until(lambda: _names(daemon) == sorted(names), timeout=10, message=f"queue {names}")
    if state is not None:
        wait_until(lambda: state.exists() and len(json.loads(state.read_text())["queued"]) ==
                   len(names), timeout=10, message="the watcher notes them")  # fmt: skip


def test_appended_lines_are_queued_once_across_rewrites_and_restarts(daemon):
    daemon.start(gpus=2)
    jobs = daemon.fake.root / "jobs.txt"
    state = daemon.fake.root / "watch.json"
    jobs.write_text("# held jobs: they stay in the queue\n-J a -- true\n-J b -- true\n")
    w = _watch(daemon, jobs, state)
    try:
        _until(daemon, ["a", "b"])
        with open(jobs, "a") as f:  # appended, in two writes: half a line is not read
            f.write("-J c -- tr")
            f.flush()
            _until(daemon, ["a", "b"])
            f.write("ue\n")
        _until(daemon, ["a", "b", "c"])
        tmp = daemon.fake.root / "jobs.new"  # an editor's save: reordered, one line added
        tmp.write_text("-J c -- true\n-J a -- true\n-J d -- true\n-J b -- true\n")
        os.replace(tmp, jobs)
        _until(daemon, ["a", "b", "c", "d"])
        jobs.write_text("")  # truncated, then a line that was queued before: the same job
        jobs.write_text("-J a -- true\n")
        with open(jobs, "a") as f:  # a second identical line: a second job
            f.write("-J a -- true\n")
        _until(daemon, ["a", "a", "b", "c", "d"])
        daemon.stop()  # the daemon restarts; a line appended meanwhile waits for it
        with open(jobs, "a") as f:
            f.write("-J e -- true\n")
        daemon.start(gpus=None)
        _until(daemon, ["a", "a", "b", "c", "d", "e"], state)
    finally:
        out = _stop(w)
    assert out.count("queued job") + out.count("(queued before)") == 6, out  # (an answer lost
    # to the daemon's stop is asked again: the daemon says it has the job)


def test_a_watcher_killed_before_noting_a_line_does_not_queue_it_twice(daemon):
    daemon.start(gpus=2)
    jobs = daemon.fake.root / "jobs.txt"
    state = daemon.fake.root / "watch.json"
    jobs.write_text("-J a -- true\n-J b -- true\n")
    w = _watch(daemon, jobs, state)
    _until(daemon, ["a", "b"])
    w.kill()
    w.wait()
    state.unlink(missing_ok=True)  # as if it died between the answer and writing its state
    with open(jobs, "a") as f:
        f.write("-J c -- true\n")
    w = _watch(daemon, jobs, state)
    try:
        _until(daemon, ["a", "b", "c"], state)
    finally:
        out = _stop(w)
    assert out.count("(queued before)") == 2 and out.count("queued job") == 1
    assert _names(daemon) == ["a", "b", "c"]


def test_a_bad_line_is_named_and_left_out_the_others_are_queued(daemon):
    daemon.start(gpus=2)
    jobs = daemon.fake.root / "jobs.txt"
    jobs.write_text("-J a -- true\n-J b -g many -- true\n-J c --gpu-ids 7 -- true\n")
    r = daemon.berth("watch", "--scan", str(jobs), "--state", str(daemon.fake.root / "s.json"),
                     "--hold")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"{jobs}:2:9: job field 'gpus' = 'many'" in r.stderr
    assert f"{jobs}:3: no GPU 7 here" in r.stderr
    assert _names(daemon) == ["a"]


def test_watch_unique_skips_a_twin_that_has_not_failed(daemon, tmp_path):
    """Issue 27.4: under --unique the same line appended twice is one job, and a twin
    submitted without --unique counts; a twin that failed does not."""
    daemon.start()
    done = daemon.submit(*daemon.workload("--seconds", "0"), hold=True)  # no --unique: a twin
    jobs = tmp_path / "jobs.txt"
    line = " ".join(["--hold", "--", *daemon.workload("--seconds", "0")]) + "\n"
    jobs.write_text(line + line + "-- sh -c 'exit 3'\n")
    state = str(tmp_path / "w.json")
    here = str(daemon.fake.root)  # (the twin's directory: part of a job's identity)
    out = daemon.berth("watch", "--scan", "--unique", "--state", state, str(jobs), cwd=here)
    assert out.returncode == 0, out.stderr
    queued = [j["id"] for j in daemon.call("queue", all=True)["jobs"]]
    assert len(queued) == 2 and done in queued  # the twin, and `exit 3`
    failing = max(queued)
    assert daemon.wait_done([failing], timeout=20)[failing]["state"] == "FAILED"
    with open(jobs, "a") as f:
        f.write("-- sh -c 'exit 3'\n")  # its twin failed: queued again
    out = daemon.berth("watch", "--scan", "--unique", "--state", state, str(jobs), cwd=here)
    assert out.returncode == 0, out.stderr
    assert len(daemon.call("queue", all=True)["jobs"]) == 3
