"""Which cluster: berth's records and default logs are the cluster's (ClusterName), so job 1 of
one cluster is not job 1 of another, and a login node with no cluster configured is told what
to do (not sinfo's DNS error)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from slurmkit import Cli
from slurmrig import SlurmRig


@pytest.fixture
def two(berth: Cli, slurm: SlurmRig) -> Iterator[tuple[str, SlurmRig]]:
    """A job of the test cluster that wrote ``A``, and a second cluster (``other``) whose first
    job gets the same id."""
    job = berth.submit("--", "echo", "A")
    assert berth("wait", job).returncode == 0
    gen = start_cluster_named("other", int(job))
    rig = next(gen)
    try:
        yield job, rig
    finally:
        gen.close()


def start_cluster_named(name: str, first_job: int) -> Iterator[SlurmRig]:
    rig = SlurmRig(cluster=name, first_job=first_job)
    try:
        rig.start()
        yield rig
    finally:
        rig.stop()


def test_the_same_job_id_on_two_clusters_keeps_two_logs(
    berth: Cli, two: tuple[str, SlurmRig]
) -> None:
    job, other = two
    there = berth("submit", "--parsable", "--", "echo", "B", SLURM_CONF=other.conf)
    assert there.returncode == 0, there.stderr
    assert there.stdout.strip() == job  # the same id, on the other cluster
    assert berth("wait", job, SLURM_CONF=other.conf).returncode == 0
    assert berth("logs", job, SLURM_CONF=other.conf).stdout == "B\n"
    assert berth("logs", job).stdout == "A\n"  # (was B's output: one file for both)
    logs = os.path.join(berth.env["BERTH_STATE_DIR"], "slurm")
    assert os.path.exists(os.path.join(logs, "berthtest", f"{job}.json"))
    with open(os.path.join(logs, "other", f"{job}.json")) as f:
        assert json.load(f)["cluster"] == "other"


def test_a_record_of_an_older_berth_is_still_read(berth: Cli) -> None:
    logs = os.path.join(berth.env["BERTH_STATE_DIR"], "slurm")
    os.makedirs(logs, exist_ok=True)
    out = os.path.join(berth.root, "old-%j.out")
    with open(os.path.join(berth.root, "old-987654.out"), "w") as f:
        f.write("old output\n")
    with open(os.path.join(logs, "987654.json"), "w") as f:  # (no cluster: keyed by id)
        json.dump({"id": "987654", "name": "old", "user": "root", "cwd": berth.root,
                   "stdout": out, "stderr": out, "array": None}, f)  # fmt: skip
    got = berth("logs", "987654")
    assert got.returncode == 0, got.stderr
    assert got.stdout == "old output\n"  # (Slurm knows no such job: the record said where)
    assert berth("logs", "987653").returncode == 2


def test_no_cluster_configured_says_what_to_do(berth: Cli) -> None:
    if os.path.exists("/etc/slurm/slurm.conf"):
        pytest.skip("this host has a Slurm cluster configured (/etc/slurm/slurm.conf)")
    env = {k: v for k, v in berth.env.items() if k != "SLURM_CONF"}
    env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
    for args in (["submit", "--", "true"], ["queue"]):
        done = subprocess.run([sys.executable, "-m", "berth.cli.main", *args], env=env,
                              cwd=berth.root, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("berth: no Slurm cluster is configured here"), done.stderr
        assert "set SLURM_CONF to its slurm.conf" in done.stderr
        assert "--backend local" in done.stderr
        assert "resolve_ctls_from_dns_srv" not in done.stderr
    missing = berth("queue", SLURM_CONF="/nonexistent/slurm.conf")
    assert missing.returncode == 2
    assert "SLURM_CONF=/nonexistent/slurm.conf: no such file" in missing.stderr
