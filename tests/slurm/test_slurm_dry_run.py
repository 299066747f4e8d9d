"""`berth submit --dry-run` on Slurm (issue 34.1): berth's checks, then the planned call as
`sbatch --test-only` (Slurm's checks, and when it would start the job); the call is shown,
nothing is submitted and no batch script written; a refusal is the real submit's (message and
exit status). `--file --dry-run` the same for every line. The environment is never printed."""

from __future__ import annotations

import glob
import json
import os
from typing import Any

from slurmkit import Cli

SECRET = "hunter2-slurm-dry-run"


def _nothing_submitted(berth: Cli, fake_gpus: Any) -> None:
    assert berth.slurm("squeue", "-h").stdout == ""
    assert glob.glob(os.path.join(fake_gpus.state_dir, "slurm", "*")) == []  # no script, no record


def test_a_dry_run_on_slurm_asks_slurm_and_submits_nothing(berth: Cli, fake_gpus: Any) -> None:
    dry = berth("submit", "--dry-run", "-g", "2", "-J", "two", "--", "sh", "-c", "echo hi",
                DRY_TOKEN=SECRET)  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert lines[0].startswith("would submit to Slurm: sbatch --parsable --gres=gpu:2 ")
    assert lines[0].endswith(".sh sh -c 'echo hi'") and "-J two" in lines[0]
    assert lines[1].startswith("  Slurm says: Job ") and " to start at " in lines[1]
    assert "variables exported (not shown)" in dry.stdout and "nothing was submitted" in dry.stdout
    assert SECRET not in dry.stdout + dry.stderr
    as_json = json.loads(berth("submit", "--dry-run", "--json", "--", "true").stdout)
    assert as_json["dry_run"] and as_json["sbatch"][0] == "sbatch" and "env" not in as_json
    _nothing_submitted(berth, fake_gpus)


def test_a_dry_run_on_slurm_refuses_what_submit_refuses(berth: Cli, fake_gpus: Any) -> None:
    for flags in (["-g", "9"], ["-d", "afterok:99999"], ["--gpu-ids", "12"], ["--retry-oom"]):
        dry = berth("submit", "--dry-run", *flags, "--", "true")
        real = berth("submit", *flags, "--", "true")
        assert real.returncode != 0, (flags, real)
        assert (dry.returncode, dry.stderr, dry.stdout) == (real.returncode, real.stderr, ""), flags
    assert "--retry-oom: not on Slurm" in dry.stderr  # (the last: refused by name)
    assert berth.slurm("squeue", "-h").stdout == ""


def test_a_jobs_file_dry_run_on_slurm_checks_every_line(berth: Cli, fake_gpus: Any) -> None:
    where = fake_gpus.root
    (where / "jobs.txt").write_text("-g 1 -- true\n-g 2 -- true\n")
    dry = berth("submit", "--file", "jobs.txt", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert [line.split(":")[0] for line in dry.stdout.splitlines() if line.startswith("line")] \
        == ["line 1", "line 2"]  # fmt: skip
    assert dry.stdout.count("Slurm says: Job ") == 2
    (where / "bad.txt").write_text("-- true\n-g 9 -- true\n")
    bad = berth("submit", "--file", "bad.txt", "--dry-run")
    assert bad.returncode != 0 and bad.stdout == "", bad
    _nothing_submitted(berth, fake_gpus)
