"""Bad values as a user types them get exit 2, one message naming the value and what to do, and
change nothing: no job queued, no job signalled (house rule; docs/testing.md "hostile tests").

The values here are the ones berth took before: an empty -D/-J/-A/--gpu-name/-o (a script's
unset variable), -o/-e naming a directory (the job only failed when it started), an empty or
non-signal -s for cancel (cancelled the job, or sent SIGHUP), a --since before 1970 or an empty
--by for report, a value starting with '-' that argparse would not take (--mem -1G), a flag
given a value (--requeue -1 or --requeue 3: queued "-1 -- true" as the command), a time limit,
--begin or --at past the bounds (the message named the converted number; -t 1e400 was no
limit, and `update -t 1e400` "nothing to change"), --export
entries that are no names (VAR=1: the job lost its environment), a sweep range of 10^8 values
(made before the grid's bound was checked) and an empty GPU filter (--name '' matched all)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from helpers import wait_until

SUBMIT_CASES = [
    (["-D", ""], "-D/--chdir '': empty"),
    (["-D", "{root}/nowhere"], "-D/--chdir '{root}/nowhere' does not exist"),
    (["-J", ""], "-J/--job-name '': empty"),
    (["-A", ""], "-A/--project '': empty"),
    (["--gpu-name", ""], "--gpu-name '': empty"),
    (["-o", ""], "-o/--output '': empty"),
    (["--conda", ""], "--conda '': empty"),
    (["-o", "{root}"], "-o/--output '{root}' is a directory; give a file in it"),
    (["-e", "{root}"], "-e/--error '{root}' is a directory; give a file in it"),
    (["--mem", "-1G"], "give a value starting with '-' as --mem=-1G"),
    (["-t", ""], "-t/--time '': empty"),
    (["--time-limit", ""], "--time-limit '': empty"),
    (["--begin", ""], "--begin '': empty"),
    (["--env-setup", ""], "--env-setup '': empty"),
    (["--prefer", ""], "--prefer '': empty"),
    (["--inject-arg", ""], "--inject-arg '': empty"),
    (["--notify", ""], "--notify '': empty"),
    (["--mail-user", ""], "--mail-user '': empty"),
    (["--export", ""], "--export '': empty"),
    (["--export", "PATH,CUDA=1"], "--export 'PATH,CUDA=1': 'CUDA=1' is not a variable's name"),
    (["--export", "A B"], "--export 'A B': 'A B' is not a variable's name"),
    (["--export", "PATH,,HOME"], "--export 'PATH,,HOME': '' is not a variable's name"),
    (["--requeue", "-1"], "'-1' would be the command; --requeue takes no value: give the "
                          "command after -- (berth submit -- python train.py)"),
    (["--requeue", "3"], "'3' would be the command; --requeue takes no value"),
    (["--hold", "-5"], "'-5' would be the command; --hold takes no value"),
    (["-1", "true"], "'-1' would be the command: give the command after --"),
    (["-t", "99999999999d"], "invalid -t/--time '99999999999d': at most 366 days; leave it out"),
    (["-t", "400-00:00:00"], "invalid -t/--time '400-00:00:00': at most 366 days"),
    (["--time-limit", "99999999999"], "invalid --time-limit '99999999999': at most 366 days"),
    (["-t", "1e400"], "invalid -t/--time '1e400': at most 366 days"),
    (["--begin", "now+99999999d"], "invalid --begin 'now+99999999d': too far ahead (berth "
                                   "takes times up to the year 5138); give a nearer time"),
    (["--begin", "now+inf"], "invalid --begin 'now+inf': too far ahead"),
]  # fmt: skip


@pytest.mark.parametrize(("flags", "said"), SUBMIT_CASES)
def test_submit_refuses_and_queues_nothing(daemon: Any, flags: list[str], said: str) -> None:
    daemon.start()
    root = str(daemon.fake.root)
    r = daemon.berth("submit", *[f.format(root=root) for f in flags], "--", "true")
    assert r.returncode == 2, r.stdout + r.stderr
    assert said.format(root=root) in r.stderr
    assert "Traceback" not in r.stderr
    assert daemon.call("queue", all=True)["jobs"] == []


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["-t", "99999999999d"], "invalid -t/--time '99999999999d': at most 366 days"),
        (["-t", "1e400"], "invalid -t/--time '1e400': at most 366 days"),  # ("nothing to change")
    ],
)
def test_update_refuses_and_changes_nothing(daemon: Any, flags: list[str], said: str) -> None:
    daemon.start()
    job_id = daemon.submit("true", hold=True, time_limit=60)
    r = daemon.berth("update", str(job_id), *flags)
    assert r.returncode == 2, r.stdout + r.stderr
    assert said in r.stderr and "Traceback" not in r.stderr
    assert daemon.job(job_id)["time_limit"] == 60


@pytest.mark.parametrize("limit", ["25d", "366-00:00:00"])
def test_a_time_limit_past_24_days_runs(daemon: Any, limit: str) -> None:
    """The supervisor waited in poll() for the whole limit, in ms as a C int: from 24.8 days
    on it died at once (OverflowError) and the job ended LOST."""
    daemon.start()
    r = daemon.berth("submit", "-t", limit, "--", "true")
    assert r.returncode == 0, r.stderr
    job_id = int(r.stdout.split()[2])
    assert daemon.wait_done([job_id])[job_id]["state"] == "COMPLETED", daemon.job(job_id)


def test_release_at_too_far_ahead_names_the_value(daemon: Any) -> None:
    daemon.start()
    job_id = daemon.submit("true", hold=True)
    r = daemon.berth("release-job", "--at", "now+99999999d", str(job_id))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "invalid --at 'now+99999999d': too far ahead (berth takes times up to" in r.stderr
    assert daemon.job(job_id)["held"] is True and daemon.job(job_id)["not_before"] is None


def test_sweep_refuses_a_huge_range_at_once(daemon: Any) -> None:
    """{1..99999999} was made into 10^8 strings before the grid's bound was checked (minutes)."""
    daemon.start()
    r = daemon.berth("sweep", "--", "echo", "{1..99999999}", timeout=10)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "sweep: '{1..99999999}' is 99999999 values; a grid has at most 10000" in r.stderr
    assert daemon.call("queue", all=True)["jobs"] == []


@pytest.mark.parametrize("signal", ["", "SIG_IGN", "_DFL"])
def test_cancel_bad_signal_leaves_the_job_running(daemon: Any, signal: str) -> None:
    daemon.start()
    job_id = daemon.submit(*daemon.workload("--seconds", "60"))
    wait_until(lambda: daemon.job(job_id)["state"] == "RUNNING", message="running")
    r = daemon.berth("cancel", "-s", signal, str(job_id))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"unknown signal {signal!r}: use a name (TERM, KILL, USR1) or a number" in r.stderr
    job = daemon.job(job_id)
    assert job["state"] == "RUNNING"
    assert all(h["state"] != "CANCELLED" for h in job["history"])


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--since", "99999999d"], "--since '99999999d': before 1970"),
        (["--since", "1960-01-01"], "--since '1960-01-01': before 1970"),
        (["--since", "7d", "--until", "99999999d"], "--until '99999999d': before 1970"),
        (["--by", ""], "--by '': empty; use user"),
    ],
)
def test_report_refuses(daemon: Any, args: list[str], said: str) -> None:
    daemon.start()
    r = daemon.berth("report", *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert said in r.stderr
    assert "Traceback" not in r.stderr


def test_submit_file_refuses_an_empty_option(daemon: Any) -> None:
    """``submit --file`` (each line a job, through submit_file) refuses an empty -J as submit."""
    daemon.start()
    path = os.path.join(str(daemon.fake.root), "jobs.txt")
    with open(path, "w") as f:
        f.write("true\n")
    r = daemon.berth("submit", "-J", "", "--file", path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "-J/--job-name '': empty" in r.stderr
    assert daemon.call("queue", all=True)["jobs"] == []


@pytest.mark.parametrize(
    "argv",
    [["select", "--name", ""], ["run", "--name", "", "--", "true"]],
)
def test_an_empty_gpu_filter_is_refused(daemon: Any, argv: list[str]) -> None:
    """``--name ""`` (a script's unset variable) matched every GPU: select printed ids, run ran."""
    daemon.start()
    r = daemon.berth(*argv)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{argv[1]} '': empty; give a value, or leave {argv[1]} out" in r.stderr
    assert r.stdout == ""
