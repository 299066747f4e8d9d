"""`berth update` on Slurm (issue 24.3): a pending job changed through ``scontrol update``
(Gres, TimeLimit, Name, Dependency, Nice for -p) against the test slurmctld; a running one
refused by name before scontrol is asked; what submit's checks refuse, refused the same.
(The rig's user is root, a Slurm operator: Nice=-3 is allowed to it.)"""

from __future__ import annotations

from helpers import wait_until
from slurmkit import Cli


def _record(berth: Cli, job: str) -> str:
    return berth.slurm("scontrol", "-o", "show", "job", job).stdout


def test_update_a_pending_job_on_slurm(berth: Cli) -> None:
    blocker = berth.submit("-g", "4", "--", "sleep", "60")
    first = berth.submit("--hold", "--", "true")
    job = berth.submit("--hold", "-g", "1", "-J", "one", "--", "true")
    wait_until(lambda: berth.state(blocker) == "RUNNING", timeout=20, message="it runs")
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
