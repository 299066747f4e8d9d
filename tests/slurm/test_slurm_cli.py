"""`berth submit/queue/show/cancel/logs` on the test Slurm, as a user types them: the same
commands as on the local queue, with --backend slurm (or BERTH_BACKEND=slurm)."""

from __future__ import annotations

import os
from typing import Any

from helpers import wait_until
from slurmkit import Cli


def test_submit_queue_show_and_logs(berth: Cli) -> None:
    sub = berth("submit", "--parsable", "-g", "2", "-J", "two", "--", "sh", "-c",
                "echo gpus=$CUDA_VISIBLE_DEVICES; sleep 30")  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip()
    wait_until(lambda: berth.state(job) == "RUNNING", timeout=20, message="it runs")
    queue = berth("queue").stdout.splitlines()
    assert queue[0].split() == ["JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES",
                                "GPUS", "NODELIST(REASON)"]  # fmt: skip
    row = next(line.split() for line in queue if line.split()[0] == job)
    assert row[2:5] == ["two", "root", "R"] and row[7] == "2" and row[8] == "localhost"
    show = berth("show", job).stdout
    assert f"Job {job} (two) of root on Slurm: RUNNING" in show
    assert "TresPerNode=gres:gpu:2" in show and "script: " in show
    logs = wait_until(lambda: berth("logs", job).stdout, timeout=20, message="output")
    gpus = logs.strip().removeprefix("gpus=").split(",")
    assert len(gpus) == 2 and len(set(gpus)) == 2
    follower = berth.popen("logs", "-f", job)  # follows a job that gets cancelled
    said = berth("cancel", job)
    assert (said.returncode, said.stdout) == (0, f"job {job}: cancelled\n")
    wait_until(lambda: berth.state(job) == "CANCELLED", timeout=20, message="cancelled")
    out, _ = follower.communicate(timeout=20)
    assert follower.returncode == 1 and out.startswith("gpus=")


def test_logs_follow_streams_until_the_job_ends_with_its_status(berth: Cli) -> None:
    job = berth("submit", "--parsable", "--", "sh", "-c",
                "for i in 1 2 3; do echo line$i; sleep 0.3; done; exit 4").stdout.strip()  # fmt: skip
    follow = berth("logs", "-f", job)
    assert follow.stdout == "line1\nline2\nline3\n"
    assert follow.returncode == 4


def test_submit_wait_and_interactive(berth: Cli) -> None:
    waited = berth("submit", "--wait", "--", "sh", "-c", "exit 5")
    assert waited.returncode == 5
    assert "FAILED (exit code 5)" in waited.stderr
    live = berth("submit", "-i", "--", "echo", "hello", "$HOME")
    assert (live.returncode, live.stdout) == (0, "hello $HOME\n")


def test_an_array_with_a_throttle(berth: Cli) -> None:
    sub = berth("submit", "--array", "0-3%2", "--", "sh", "-c", "echo task $BERTH_ARRAY_TASK_ID")
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.split()[2]
    assert sub.stdout == (
        f"Submitted job {job} to Slurm: an array of 4 tasks ({job}_0..{job}_3, at most 2 at once)\n"
    )
    wait_until(lambda: berth.state(f"{job}_3") == "COMPLETED", timeout=30, message="done")
    for i in range(4):
        assert berth("logs", f"{job}_{i}").stdout == f"task {i}\n"
    whole = berth("logs", job)
    assert whole.returncode == 2 and "is an array" in whole.stderr


def test_refusals_in_berths_words_change_nothing(berth: Cli) -> None:
    too_big = berth("submit", "-g", "9", "--", "true")
    assert too_big.returncode == 1
    assert too_big.stderr.startswith("berth: no node has 9 GPUs (the most on one node is 4)")
    mem = berth("submit", "--mem", "12G", "--", "true")
    assert mem.returncode == 2
    assert "--mem: not on Slurm: Slurm does not schedule by GPU memory" in mem.stderr
    bad_dep = berth("submit", "--dependency", "afterok:99999", "--", "true")
    assert bad_dep.returncode == 2 and "Slurm knows no job 99999" in bad_dep.stderr
    assert berth("queue").stdout.count("\n") == 1  # only the header: nothing waits or runs


def test_the_local_queue_refuses_what_only_slurm_does(berth: Cli) -> None:
    out = berth("submit", "--backend", "local", "--partition", "gpu", "--", "true")
    assert out.returncode == 2 and "--partition is for Slurm" in out.stderr
    out = berth("logs", "--backend", "local", "3_x")
    assert out.returncode == 2 and "invalid job id '3_x': expected 12 or 12_3" in out.stderr


def test_the_backend_comes_from_the_config(berth: Cli, tmp_path: Any) -> None:
    config = os.path.join(str(tmp_path), "config.toml")
    with open(config, "w") as f:
        f.write('[queue]\nbackend = "slurm"\n')
    sub = berth("submit", "--parsable", "--", "true", BERTH_BACKEND="", BERTH_CONFIG=config)
    assert sub.returncode == 0 and sub.stdout.strip().isdigit(), sub.stderr


def test_submit_a_file_of_jobs(berth: Cli) -> None:
    jobs = os.path.join(berth.root, "jobs.txt")
    with open(jobs, "w") as f:
        f.write("echo one\n-g 0.5 -- echo half\n# a comment\n--wrap 'echo $((1 + 1))'\n")
    sub = berth("submit", "--parsable", "--file", jobs)
    assert sub.returncode == 0, sub.stderr
    ids = sub.stdout.split()
    assert len(ids) == 3
    for i in ids:
        assert berth("logs", "-f", i).returncode == 0
    assert [berth("logs", i).stdout for i in ids] == ["one\n", "half\n", "2\n"]
