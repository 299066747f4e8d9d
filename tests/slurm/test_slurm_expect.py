"""Slurm as Slurm users expect it (issue 22), against the test slurmctld: a signal reaches the
batch job's command (cancel -s), hold/release of a pending job, sbatch options passed through
(--sbatch-arg, a script's #SBATCH lines), berth's refusals before sbatch, the requeue of a job
at its time limit (USR1 sent as Slurm's --signal=B:USR1 would send it)."""

from __future__ import annotations

import json
import os
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


def _scontrol(berth: Cli, job: str) -> str:
    return berth.slurm("scontrol", "-o", "show", "job", job).stdout


def test_cancel_with_a_signal_reaches_the_jobs_handler(berth: Cli) -> None:
    mark = os.path.join(berth.root, "got-usr1")
    job = _submit(berth, "--", "bash", "-c",
                  f"trap 'echo usr1 > {mark}; exit 0' USR1; echo ready; "
                  "while true; do sleep 0.1; done")  # fmt: skip
    wait_until(lambda: berth("logs", job).stdout == "ready\n", timeout=20, message="it runs")
    said = berth("cancel", "-s", "USR1", job)
    assert (said.returncode, said.stdout) == (0, f"job {job}: sent signal 10\n"), said.stderr
    wait_until(lambda: os.path.exists(mark), timeout=20, message="the handler ran")
    wait_until(lambda: _state(berth, job) == "COMPLETED", timeout=20, message="it ended")


def test_hold_and_release_a_pending_job(berth: Cli) -> None:
    blocker = _submit(berth, "-g", "4", "--", "sleep", "60")
    job = _submit(berth, "-g", "4", "--", "true")
    wait_until(lambda: _state(berth, blocker) == "RUNNING", timeout=20, message="it runs")
    held = berth("hold", job)
    assert (held.returncode, held.stdout) == (0, f"job {job} held\n"), held.stderr
    assert "Priority=0 " in _scontrol(berth, job) and "JobHeldUser" in _scontrol(berth, job)
    running = berth("hold", blocker)
    assert running.returncode == 2 and f"job {blocker} is RUNNING" in running.stderr
    assert berth("hold", "99999").returncode == 2
    berth("cancel", blocker)
    wait_until(lambda: _state(berth, blocker) == "CANCELLED", timeout=20, message="cancelled")
    assert _state(berth, job) == "PENDING"  # held: it does not start on free GPUs
    released = berth("release-job", job)
    assert (released.returncode, released.stdout) == (0, f"job {job} released\n")
    wait_until(lambda: _state(berth, job) == "COMPLETED", timeout=20, message="it ran")
