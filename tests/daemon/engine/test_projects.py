"""Projects (issue 24.5; Slurm's accounts) on the system daemon, end to end through the real
CLI and socket as test users: require_project refuses a job without one, naming what to do;
a project not configured, and one the user is no member of (membership from the user
database: a group's member may), are refused; a project's GPU quota holds its jobs with a
reason in plain words, and its max_queued refuses more; `berth queue --project`, `berth admin
projects` (usage, quotas, members), #SBATCH --account in a script, and the usage kept across
a restart.

Needs root (to create the users and run as them), as CI runs the suite.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from helpers import wait_until
from test_system_mode import System
from userkit import TEAM, A, B, C

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")

CONFIG = f"""
[projects.vision]
max_gpus = 1
max_queued = 3
shares = 2
users = ["{B}"]
groups = ["{TEAM}"]
[projects.nlp]
users = ["{C}"]
[scheduling]
require_project = true
"""


@pytest.fixture
def system(daemon: Any) -> System:
    s = System(daemon)
    with open(s.config, "a") as f:
        f.write(CONFIG)
    return s


def test_a_job_must_name_a_project_of_its_user(system: System) -> None:
    system.start()
    none = system.berth(A, "submit", "--", "true")
    assert none.returncode != 0
    assert "this daemon requires a project ([scheduling] require_project): submit with " \
        "--project NAME (projects: vision)" in none.stderr  # fmt: skip
    other = system.berth(A, "submit", "--project", "nlp", "--", "true")
    assert other.returncode != 0
    assert f"--project 'nlp': {A} is not a member of it (its users and groups: {C})" \
        in other.stderr  # fmt: skip
    assert "name a project of yours (vision), or ask an admin to add you" in other.stderr
    unknown = system.berth(A, "submit", "-A", "nosuch", "--", "true")
    assert unknown.returncode != 0
    assert "--project 'nosuch': no such project here (projects: vision)" in unknown.stderr
    assert system.rig.call("queue")["jobs"] == []  # nothing was queued
    # A is a member through the group TEAM (the user database's, not the client's word)
    ok = system.submit(A, "--project", "vision", "--", "true")
    assert system.rig.wait_done([ok])[ok]["state"] == "COMPLETED"
    assert system.rig.job(ok)["project"] == "vision"
    assert "  project:    vision" in system.berth(A, "show", str(ok)).stdout


def test_the_quota_holds_jobs_and_max_queued_refuses_more(system: System) -> None:
    system.start()
    first = system.submit(A, "-A", "vision", "--", "sleep", "60")
    wait_until(lambda: system.rig.job(first)["state"] == "RUNNING", timeout=15)
    second = system.submit(B, "--project", "vision", "-J", "second", "--", "sleep", "60")
    elsewhere = system.submit(C, "--account", "nlp", "-J", "elsewhere", "--", "sleep", "60")
    wait_until(lambda: system.rig.job(elsewhere)["state"] == "RUNNING", timeout=15)
    queue = system.berth(B, "queue").stdout
    line = next(x for x in queue.splitlines() if " second " in x)
    assert "(ProjectGpuLimit)" in line
    assert "PROJECT " in queue  # (two projects have jobs: their lines under the table)
    assert system.rig.job(second)["reason"] == (
        "ProjectGpuLimit: project vision holds 1 of 1 GPUs allowed at once"
    )
    # max_queued = 3: a third job may queue, a fourth is refused
    third = system.submit(B, "-A", "vision", "--hold", "--", "true")
    fourth = system.berth(B, "submit", "-A", "vision", "--", "true")
    assert fourth.returncode != 0
    assert "project vision has 3 jobs queued or running; the most allowed is 3 " \
        "([projects.vision] max_queued)" in fourth.stderr  # fmt: skip
    # berth queue --project: only that project's jobs, in the table and in --json
    table = system.berth(C, "queue", "--project", "nlp").stdout
    assert " elsewhere " in table and " second " not in table
    rows = json.loads(system.berth(C, "queue", "--project", "vision", "--json").stdout)["jobs"]
    assert sorted(r["id"] for r in rows) == sorted([first, second, third])
    assert {r["project"] for r in rows} == {"vision"}
    # berth admin projects: each project's jobs and GPUs against its quotas, and members
    shown = system.berth(C, "admin", "projects")
    assert shown.returncode == 0, shown.stderr
    vision = next(x for x in shown.stdout.splitlines() if x.startswith("vision "))
    assert vision.split()[:4] == ["vision", "1", "1/1", "3/3"]
    assert f"{B},@{TEAM}" in vision and "(x2)" in vision
    assert "every job must name a project" in shown.stdout
    projects = json.loads(system.berth(C, "admin", "projects", "--json").stdout)["projects"]
    nlp = next(p for p in projects if p["project"] == "nlp")
    assert (nlp["running"], nlp["gpus"], nlp["max_gpus"], nlp["users"]) == (1, 1.0, None, [C])


def test_usage_per_project_is_kept_across_a_restart(system: System) -> None:
    system.start()
    job = system.submit(C, "-A", "nlp", "--", "sleep", "1")
    assert system.rig.wait_done([job])[job]["state"] == "COMPLETED"

    def usage() -> dict[str, float]:
        reply = json.loads(system.berth(A, "admin", "projects", "--json").stdout)
        return {p["project"]: p["usage_gpu_hours"] * 3600 for p in reply["projects"]}

    before = usage()
    assert before["nlp"] == pytest.approx(1.0, abs=0.5) and before["vision"] == 0.0
    system.rig.stop()
    system.start()
    assert usage()["nlp"] == pytest.approx(before["nlp"], rel=0.01)


def test_sbatch_account_in_a_script_names_the_project(system: System) -> None:
    system.start()
    script = os.path.join(system.shared, "train.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n#SBATCH --account=vision\ntrue\n")
    os.chmod(script, 0o755)
    job = system.submit(B, script)
    assert system.rig.job(job)["project"] == "vision"


def test_resubmit_counts_the_projects_jobs_as_submit_does(system: System) -> None:
    system.start()
    done = system.submit(B, "-A", "vision", "--", "true")
    assert system.rig.wait_done([done])[done]["state"] == "COMPLETED"
    held = [system.submit(B, "-A", "vision", "--hold", "--", "true") for _ in range(3)]
    again = system.berth(B, "resubmit", str(done))
    assert again.returncode != 0
    assert "project vision has 3 jobs queued or running; the most allowed is 3 " \
        "([projects.vision] max_queued)" in again.stderr  # fmt: skip
    assert sorted(r["id"] for r in system.rig.call("queue")["jobs"]) == held  # nothing queued
