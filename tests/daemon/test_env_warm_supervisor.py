"""On the system daemon, a warm supervisor (one that ran its user's last job) runs the next
with exactly the environment its user sent for it: never a variable of another user's job,
nor one its own user sent with an earlier job and not with this one.

Needs root (to run as other users), as CI runs the suite.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from test_system_mode import System
from userkit import A, B

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


@pytest.fixture
def system(daemon: Any) -> System:
    return System(daemon)


def _run(system: System, user: str, env: dict[str, str]) -> tuple[int, dict[str, str]]:
    """One job of ``user`` with ``env``, waited for: (its supervisor's pid, its environment)."""
    job = {"argv": ["sh", "-c", 'echo "PARENT=$PPID"; env'], "env": env, "cwd": "/"}
    job_id = system.call(user, "submit", job=job)["ok"]["job_id"]
    assert system.rig.wait_done([job_id])[job_id]["state"] == "COMPLETED"
    with open(system.rig.job(job_id)["stdout"]) as f:
        lines = f.read().splitlines()
    parent = int(lines[0].removeprefix("PARENT="))
    return parent, dict(line.split("=", 1) for line in lines[1:] if "=" in line)


def test_each_job_runs_with_its_own_users_environment_and_nothing_more(system: System) -> None:
    system.start()
    path = {"PATH": "/usr/bin:/bin"}
    sup_a, first = _run(system, A, {**path, "SECRET_A": "s3cret", "SAME": "a"})
    _, theirs = _run(system, B, {**path, "SAME": "b"})
    sup_a2, second = _run(system, A, {**path, "SAME": "a", "OTHER": "x"})
    sup_a3, third = _run(system, A, {**path, "SECRET_A": "again"})
    assert sup_a == sup_a2 == sup_a3  # one warm supervisor: A's later jobs went as changes
    assert first["SECRET_A"] == "s3cret" and first["SAME"] == "a"
    assert "SECRET_A" not in theirs and theirs["SAME"] == "b"
    assert "SECRET_A" not in second and second["OTHER"] == "x" and second["SAME"] == "a"
    assert third["SECRET_A"] == "again" and "OTHER" not in third and "SAME" not in third
