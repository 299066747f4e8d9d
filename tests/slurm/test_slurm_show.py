"""`berth show` on Slurm: an array's tasks each with Slurm's record under its own line, and
scontrol's values with spaces kept whole (text and --json)."""

from __future__ import annotations

import json
import os

from helpers import wait_until
from slurmkit import Cli


def test_an_arrays_show_keeps_each_tasks_record_under_it(berth: Cli) -> None:
    job = berth.submit("--array", "0-2", "--", "sleep", "60")
    wait_until(lambda: all(berth.state(f"{job}_{i}") == "RUNNING" for i in range(3)),
               timeout=20, message="its tasks run")  # fmt: skip
    ids = dict(line.split() for line in berth.slurm("squeue", "-h", "-r", "-o", "%A %i").stdout
               .splitlines())  # fmt: skip
    lines = berth("show", job).stdout.splitlines()
    heads = [k for k, line in enumerate(lines) if line.startswith("Job ")]
    assert len(heads) == 3
    for k in heads:
        task = lines[k].split()[1]
        assert lines[k + 1].startswith("  gpus: ")
        slurm = lines[k + 2]
        assert slurm.startswith("  slurm: JobId="), lines
        raw = slurm.split()[1].removeprefix("JobId=")
        assert ids[raw] == task  # (the record under a task's line is that task's)


def test_show_keeps_values_with_spaces(berth: Cli) -> None:
    where = os.path.join(berth.root, "my runs", "seed 1 lr=0.1")  # (a word=, lowercase)
    os.makedirs(where)
    job = berth.submit("-D", where, "--", "sleep", "60")
    shown = json.loads(berth("show", job, "--json").stdout)
    assert shown["slurm"][0]["WorkDir"] == where
    assert f"WorkDir={where}" in berth("show", job).stdout
