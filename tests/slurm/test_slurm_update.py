"""`berth update` on Slurm (issue 24.3): a pending job changed through ``scontrol update``
(Gres, TimeLimit, Name, Dependency, Nice for -p) against the test slurmctld; a running one
refused by name before scontrol is asked; what submit's checks refuse, refused the same.
(The rig's user is root, a Slurm operator: Nice=-3 is allowed to it.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import wait_until
from slurmkit import Cli


@pytest.fixture
def berth(fake_gpus: Any, slurm: Any) -> Cli:
    return Cli(fake_gpus, slurm)


def _submit(berth: Cli, *args: str) -> str:
    out = berth("submit", "--parsable", *args)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _state(berth: Cli, job: str) -> str:
    rows = json.loads(berth("queue", "--all", "--json").stdout)
    return next((r["state"] for r in rows if r["id"] == job), "")


def _record(berth: Cli, job: str) -> str:
    return berth.slurm("scontrol", "-o", "show", "job", job).stdout


def test_update_a_pending_job_on_slurm(berth: Cli) -> None:
    blocker = _submit(berth, "-g", "4", "--", "sleep", "60")
    first = _submit(berth, "--hold", "--", "true")
    job = _submit(berth, "--hold", "-g", "1", "-J", "one", "--", "true")
    wait_until(lambda: _state(berth, blocker) == "RUNNING", timeout=20, message="it runs")
    said = berth("update", job, "-g", "2", "-t", "90", "-J", "two", "-p", "3",
                 "--dependency", f"afterok:{first}")  # fmt: skip
    assert said.returncode == 0, said.stderr
    assert f"job {job}: updated: Gres=gpu:2" in said.stdout
    record = _record(berth, job)
    assert "TresPerNode=gres:gpu:2" in record, record
    assert "TimeLimit=01:30:00" in record and "JobName=two" in record and "Nice=-3" in record
    assert f"Dependency=afterok:{first}" in record
    assert berth("update", job, "--dependency", "").returncode == 0
    assert "Dependency=(null)" in _record(berth, job)
    running = berth("update", blocker, "-t", "5")
    assert running.returncode == 2, running.stderr
    assert f"job {blocker} is RUNNING: only a pending job can be updated" in running.stderr
    assert berth("update", job, "-g", "0").returncode == 2  # (the job spec's own check)
    assert berth("update", "99999", "-t", "5").returncode == 2
    unknown = berth("update", job, "--dependency", "afterok:99999")
    assert unknown.returncode == 2 and "Slurm knows no job 99999" in unknown.stderr
