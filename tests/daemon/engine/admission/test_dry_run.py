"""`berth submit --dry-run` runs every check the real submit runs, the daemon's own over the
socket (issue 40.1): on an 8-GPU host it refuses `-g 9`, `-d afterok:99999`, `--gpu-ids 12`
and `-g 0.5 --mem 200G` exactly as submit does (message and exit status); a good dry run says
what would be queued (the id it would get, GPUs, time limit, the reason it would wait with,
its log) and changes nothing: the queue, the next job id and the state dir are as they were.
It never prints the environment. `--file --dry-run` checks every line with the daemon too;
without a daemon a dry run says its checks could not be run (exit 5)."""

from __future__ import annotations

import json
import os

import pytest

EXAMPLES = [
    ["-g", "9"],
    ["-d", "afterok:99999"],
    ["--gpu-ids", "12"],
    ["-g", "0.5", "--mem", "200G"],
]
SECRET = "hunter2-dry-run-secret"


def _eight(daemon):
    daemon.fake.setup(n=8, memory="80G")
    daemon.env["DRY_RUN_TOKEN"] = SECRET  # (in the caller's environment: exported by submit)
    daemon.start()


def _snapshot(daemon):
    """The queue as the daemon keeps it (the store's rows included) and the state dir's
    entries (a dry run makes no directory)."""
    jobs = daemon.call("queue", all=True)["jobs"]
    entries = sorted(
        os.path.relpath(os.path.join(d, n), daemon.state_dir)
        for d, dirs, files in os.walk(daemon.state_dir)
        for n in dirs
    )
    return jobs, entries


@pytest.mark.parametrize("flags", EXAMPLES, ids=lambda f: " ".join(f))
def test_a_dry_run_refuses_exactly_what_submit_refuses(daemon, flags):
    _eight(daemon)
    before = _snapshot(daemon)
    dry = daemon.berth("submit", "--dry-run", *flags, "--", "true")
    real = daemon.berth("submit", *flags, "--", "true")
    assert real.returncode not in (0, 5), real  # (the daemon refused it)
    assert (dry.returncode, dry.stderr) == (real.returncode, real.stderr)
    assert dry.stdout == "" and _snapshot(daemon) == before


def test_a_good_dry_run_says_what_would_be_queued_and_changes_nothing(daemon):
    _eight(daemon)
    first = daemon.submit("true", hold=True)
    before = _snapshot(daemon)
    dry = daemon.berth("submit", "--dry-run", "-g", "2", "-t", "1:00:00", "--hold",
                       "-d", f"afterany:{first}", "--", "true")  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert f"would queue job {first + 1}: true" in dry.stdout
    assert "GPUs: 2" in dry.stdout and "time limit 1:00:00 (-t)" in dry.stdout
    assert f"dependency afterany:{first}" in dry.stdout and "would wait first: Held" in dry.stdout
    assert "variables exported (not shown)" in dry.stdout and "nothing was queued" in dry.stdout
    assert SECRET not in dry.stdout + dry.stderr
    as_json = daemon.berth("submit", "--dry-run", "--json", "-g", "0.5", "--mem", "20G",
                           "--", "true")  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    reply = json.loads(as_json.stdout)
    assert reply["dry_run"] and reply["would_be"] == first + 1 and reply["gpus"] == 0.5
    assert "env" not in reply["job"] and reply["env_vars"] >= 1
    assert SECRET not in as_json.stdout
    assert reply["stdout"].endswith(f"/{first + 1}.out")
    assert _snapshot(daemon) == before  # no job, no journal row, no log directory made
    assert daemon.submit("true") == first + 1  # no id was used up


def test_the_daemons_dry_run_makes_nothing(daemon):
    """Over the socket: ``dry_run`` on ``submit`` and ``submit_all`` answers what would be
    queued (ids in turn) and keeps nothing: not even the log directory a root daemon makes
    for a user at their first submit."""
    _eight(daemon)
    job = {"argv": ["true"], "env": {"X": SECRET}, "cwd": str(daemon.fake.root)}
    before = _snapshot(daemon)
    one = daemon.call("submit", job=job, dry_run=True)
    assert one["would_be"] == 1 and one["env_vars"] == 1 and SECRET not in json.dumps(one)
    many = daemon.call("submit_all", jobs=[job, {**job, "array": "0-2"}, job], dry_run=True)
    assert [r["would_be"] for r in many["replies"]] == [1, 2, 5]
    assert many["replies"][1]["tasks"] == ["2_0", "2_1", "2_2"]
    assert _snapshot(daemon) == before
    assert daemon.submit("true") == 1
    if os.geteuid() == 0:  # (a root daemon: the real submit made the user's log directory)
        assert _snapshot(daemon)[1] != before[1]


def test_a_jobs_file_dry_run_checks_every_line_with_the_daemon(daemon):
    _eight(daemon)
    where = daemon.fake.root
    (where / "good.txt").write_text("-g 2 -- true\n-J b -- true\n")
    (where / "bad.txt").write_text("-- true\n--gpu-ids 12 -- true\n")
    dry = daemon.berth("submit", "--file", "good.txt", "--dry-run", cwd=str(where))
    assert dry.returncode == 0, dry.stderr
    assert "line 1: would queue job 1: true" in dry.stdout
    assert "line 2: would queue job 2: true" in dry.stdout
    assert SECRET not in dry.stdout + dry.stderr
    as_json = daemon.berth("submit", "--file", "good.txt", "--dry-run", "--json",
                           cwd=str(where))  # fmt: skip
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [(r["line"], r["would_be"]) for r in rows] == [(1, 1), (2, 2)]
    real = daemon.berth("submit", "--file", "bad.txt", cwd=str(where))
    bad = daemon.berth("submit", "--file", "bad.txt", "--dry-run", cwd=str(where))
    assert real.returncode not in (0, 5) and "bad.txt:2" in real.stderr, real
    assert (bad.returncode, bad.stderr) == (real.returncode, real.stderr)
    assert daemon.call("queue", all=True)["jobs"] == []


def test_without_a_daemon_a_dry_run_says_its_checks_were_not_run(daemon, tmp_path):
    daemon.fake.setup(n=8, memory="80G")
    daemon.env["BERTH_SOCKET"] = str(tmp_path / "none.sock")
    dry = daemon.berth("submit", "--dry-run", "--", "true")
    assert dry.returncode == 5 and dry.stdout == ""
    assert "the daemon's were not run" in dry.stderr
    bad = daemon.berth("submit", "--dry-run", "-g", "-1", "--", "true")  # berth's own checks
    assert bad.returncode == 2 and "'gpus' = -1" in bad.stderr


def test_a_dry_run_checks_the_daemons_time_limit_and_finds_a_unique_twin(daemon):
    daemon.start("--max-job-time", "1:00:00")
    real = daemon.berth("submit", "-t", "2:00:00", "--", "true")
    dry = daemon.berth("submit", "--dry-run", "-t", "2:00:00", "--", "true")
    assert real.returncode != 0 and "--max-job-time" in real.stderr, real
    assert (dry.returncode, dry.stderr, dry.stdout) == (real.returncode, real.stderr, "")
    first = int(daemon.berth("submit", "--parsable", "--unique", "--hold", "--", "true").stdout)
    twin = daemon.berth("submit", "--dry-run", "--unique", "--hold", "--", "true")
    assert twin.returncode == 0, twin.stderr
    assert twin.stdout.startswith(f"job {first} is the same job (PENDING): not queued again")
    fresh = daemon.berth("submit", "--dry-run", "--", "true")
    assert "time limit 1:00:00 (the daemon's --max-job-time)" in fresh.stdout
    assert len(daemon.call("queue", all=True)["jobs"]) == 1
