"""What Slurm refuses, said as Slurm says it and with an exit status that tells: another
user's job that scancel will not cancel, an option sbatch does not know (--sbatch-arg), an
array above MaxArraySize on a dry run as on the real submit; and how a job whose node failed
(NODE_FAIL) ends, by the one rule of jobs Slurm ended."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator

import pytest
from helpers import wait_until
from slurmkit import Cli
from slurmrig import SlurmRig
from userkit import B, berth_as, ensure_users


def test_a_refused_cancel_exits_non_zero_with_scancels_reason(
    berth: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    ensure_users()
    job = berth.submit("--", "sleep", "60")
    for name, value in berth.env.items():
        monkeypatch.setenv(name, value)
    for name in ("_strptime", "berth.backends.slurm", "berth.cli.backend_choice"):
        importlib.import_module(name)  # (the child cannot import once it is B)
    other = berth_as(B, "cancel", job)
    assert other.returncode == 4, other
    assert f"job {job} not cancelled: scancel says 'Access/permission denied'" in other.stderr
    assert "its owner (root)" in other.stderr
    assert berth.state(job) in ("PENDING", "RUNNING")  # nothing was cancelled
    mine = berth("cancel", job)
    assert (mine.returncode, mine.stdout) == (0, f"job {job}: cancelled\n")


def test_sbatchs_own_reason_for_a_refused_sbatch_arg(berth: Cli) -> None:
    out = berth("submit", "--sbatch-arg=--bogus-option", "--", "true")
    assert out.returncode == 1
    assert out.stderr == "berth: Slurm refused the job: unrecognized option '--bogus-option'\n"
    assert berth("queue", "--noheader").stdout == ""


def test_a_sweep_dry_run_meets_the_array_limit_the_submit_meets(berth: Cli) -> None:
    real = berth("sweep", "echo {0..1500}")
    dry = berth("sweep", "--dry-run", "echo {0..1500}")
    assert (dry.returncode, real.returncode) == (1, 1)
    said = dry.stderr.splitlines()[-1]
    assert said == real.stderr.splitlines()[-1]
    assert said.startswith("berth: Slurm refused the job: the cluster does not take the array")
    assert "highest index 1500 must be below MaxArraySize 1001" in said
    assert "would submit" not in dry.stdout
    fits = berth("sweep", "--dry-run", "echo {0..1000}")
    assert fits.returncode == 0, fits.stderr
    assert berth("queue", "--noheader").stdout == ""


@pytest.fixture
def own() -> Iterator[SlurmRig]:
    """A cluster of its own (its node is taken down under a job)."""
    rig = SlurmRig(cluster="nodefail")
    try:
        rig.start()
        yield rig
    finally:
        rig.stop()


def test_a_job_whose_node_failed_ends_by_the_one_rule(berth: Cli, own: SlurmRig) -> None:
    conf = own.conf
    sbatch = ("sbatch", "--parsable", "--no-requeue", "-o", "/dev/null", "--wrap", "sleep 60")
    job = own.run(*sbatch).stdout.strip()
    wait_until(lambda: _state(berth, job, conf) == "RUNNING", timeout=20, message="it runs")
    own.run("scontrol", "update", "nodename=localhost", "state=down", "reason=test")
    wait_until(lambda: _state(berth, job, conf) == "LOST", timeout=20, message="node failed")
    lines = berth("queue", "--all", SLURM_CONF=conf).stdout.splitlines()
    row = next(r.split() for r in lines if r.split()[0] == job)
    assert row[lines[0].split().index("ST")] == "NF"
    rows = json.loads(berth("queue", "--all", "--json", SLURM_CONF=conf).stdout)
    info = next(r for r in rows if r["id"] == job)
    assert (info["native"], info["exit_code"]) == ("NODE_FAIL", 143)
    waited = berth("wait", job, SLURM_CONF=conf)
    assert waited.returncode == 1  # as a cancelled or timed-out job: not the command's status
    assert f"job {job}: LOST" in waited.stdout + waited.stderr


def _state(berth: Cli, job: str, conf: str) -> str:
    rows = json.loads(berth("queue", "--all", "--json", SLURM_CONF=conf).stdout)
    return next((r["state"] for r in rows if r["id"] == job), "")
