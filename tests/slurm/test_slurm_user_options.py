"""Options as an ordinary Slurm user has them (issue 34, points 2, 5, 7), against the test
slurmctld, through the CLI: priority as ``--nice`` (lower is anyone's, higher is refused with
the reason), ``--no-requeue`` as sbatch's, quoted ``#SBATCH`` values read as sbatch reads
them."""

from __future__ import annotations

import _strptime  # noqa: F401  (update reads times: imported before berth_as's user switch)
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from slurmkit import Cli
from userkit import A, berth_as, ensure_users


def _scontrol(berth: Cli, job: str) -> str:
    return berth.slurm("scontrol", "-o", "show", "job", job).stdout


@pytest.fixture
def as_user(slurm: Any) -> Iterator[tuple[str, dict[str, str]]]:
    """User A's own directory (cwd and state dir) and a login-like environment for the test
    Slurm."""
    ensure_users()
    home = tempfile.mkdtemp(prefix="bsl-user-", dir="/tmp")
    os.chmod(home, 0o777)
    env = {**slurm.env, "BERTH_BACKEND": "slurm", "BERTH_STATE_DIR": os.path.join(home, "st")}
    try:
        yield home, env
    finally:
        slurm.clear()  # (A's jobs first: they write in home)
        shutil.rmtree(home, ignore_errors=True)


def test_an_ordinary_user_lowers_priority_and_is_told_why_not_higher(
    berth: Cli, as_user: tuple[str, dict[str, str]]
) -> None:
    home, env = as_user
    low = berth_as(A, "submit", "--parsable", "--hold", "-D", home, "-p", "-3", "--", "true",
                   env=env)  # fmt: skip
    assert low.returncode == 0, low.stderr
    job = low.stdout.strip()
    assert "Nice=3 " in _scontrol(berth, job)
    high = berth_as(A, "submit", "-D", home, "-p", "5", "--", "true", env=env)
    assert high.returncode == 1
    assert "-p 5: a higher priority (sbatch --nice=-5) is for the cluster's Slurm operators" in (
        high.stderr
    ), high.stderr
    lower = berth_as(A, "update", job, "-p", "-7", env=env)
    assert lower.returncode == 0, lower.stderr
    assert "Nice=7 " in _scontrol(berth, job)
    higher = berth_as(A, "update", job, "-p", "2", env=env)
    assert higher.returncode == 1
    assert "-p 2: a higher priority (Nice=-2) is for the cluster's Slurm operators" in (
        higher.stderr
    ), higher.stderr
    assert "Nice=7 " in _scontrol(berth, job)  # (the refused update changed nothing)
    root = berth.submit("--hold", "-p", "4", "--", "true")  # (root is an operator)
    assert "Nice=-4 " in _scontrol(berth, root)


def test_no_requeue_is_sbatchs_and_may_be_passed_through(berth: Cli) -> None:
    plain = berth.submit("--hold", "--", "true")
    assert "Requeue=1 " in _scontrol(berth, plain)  # (Slurm's default: JobRequeue=1)
    never = berth.submit("--hold", "--no-requeue", "--", "true")
    assert "Requeue=0 " in _scontrol(berth, never)
    passed = berth.submit("--hold", "--sbatch-arg=--no-requeue", "--", "true")
    assert "Requeue=0 " in _scontrol(berth, passed)
    both = berth("submit", "--requeue", "--sbatch-arg=--no-requeue", "--", "true")
    assert both.returncode == 2
    assert "--sbatch-arg --no-requeue: this job asks --requeue; give one of them" in both.stderr
    script = os.path.join(berth.root, "never.sh")
    with open(script, "w") as f:
        f.write("#!/bin/bash\n#SBATCH --no-requeue --hold\ntrue\n")
    os.chmod(script, 0o755)
    assert "Requeue=0 " in _scontrol(berth, berth.submit(script))


def test_quoted_sbatch_values_are_read_as_sbatch_reads_them(berth: Cli) -> None:
    script = os.path.join(berth.root, "quoted.sh")
    with open(script, "w") as f:
        f.write("#!/bin/bash\n"
                '#SBATCH --comment="hello world" --hold\n'
                "#SBATCH --mail-type 'END,FAIL' # a comment\n"
                "#SBATCH --mail-user='me@example.org'\n"
                "#SBATCH -J 'two words'\n"
                "true\n")  # fmt: skip
    os.chmod(script, 0o755)
    out = berth("submit", "--parsable", script)
    assert out.returncode == 0, out.stderr
    record = _scontrol(berth, out.stdout.strip())
    assert "Comment=hello world " in record and "JobName=two words " in record
    assert "MailType=END,FAIL " in record


def test_the_script_runs_as_it_was_at_submit(berth: Cli) -> None:
    """Edit a held job's script, release it: the copy taken at submit runs (issue 34.8)."""
    script = os.path.join(berth.root, "train.sh")
    with open(script, "w") as f:
        f.write("#!/bin/bash\n#SBATCH --hold\necho as-submitted $(basename $0)\n")
    os.chmod(script, 0o755)
    job = berth.submit(script)
    with open(script, "w") as f:
        f.write("#!/bin/bash\n#SBATCH --hold\necho edited\n")
    released = berth("release-job", job)
    assert released.returncode == 0, released.stderr
    ended = berth("wait", job)
    assert ended.returncode == 0, ended.stderr
    assert berth("logs", job).stdout == "as-submitted train.sh\n"
