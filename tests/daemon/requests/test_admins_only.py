"""docs/admin.md, "Who may do what": pausing and resuming GPUs, draining and undraining,
reading the enforcement log and stopping the daemon are the admins' (root, or a member of
`[claims] admin_group` as the user database says). A user who is not one, through the real
CLI on the system daemon, is refused each (exit 4, naming who may) and nothing changes: the
GPU stays paused, the daemon keeps serving. An admin of the group may.

Needs root (to act as the other users), as CI runs the suite.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from test_system_mode import System
from userkit import ADMINS, A, B, C

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


@pytest.fixture
def system(daemon: Any) -> System:
    return System(daemon)


def _paused(system: System) -> list[str]:
    gpus = system.rig.call("status")["gpus"]  # (the daemon's own view of each GPU)
    return sorted(index for index, entry in gpus.items() if entry.get("paused"))


def test_what_is_the_admins_is_refused_to_a_user_and_changes_nothing(system: System) -> None:
    system.start()
    assert system.rig.berth("pause", "0").returncode == 0
    job = system.submit(A, "--hold", "--", "sleep", "600")
    who = f"only root, group '{ADMINS}' may"
    for args, what in (
        (("resume", "0"), "resume GPUs"),
        (("resume", "--all"), "resume GPUs"),
        (("admin", "undrain", "--all"), "resume GPUs"),
        (("admin", "drain", "1", "--reason", "mine now"), "drain GPUs"),
        (("pause", "1"), "pause GPUs"),
        (("admin", "log"), "read the enforcement log"),
        (("daemon", "--stop", "--system"), "stop the daemon"),
    ):
        out = system.berth(B, *args)
        assert out.returncode == 4, (args, out.returncode, out.stdout, out.stderr)
        assert f"{B} may not {what}: {who}" in out.stderr, (args, out.stderr)
    # Nothing changed: GPU 0 paused, GPU 1 not, the daemon serving, A's job as it was.
    assert system.rig.call("ping") is not None
    assert system.rig.proc is not None and system.rig.proc.poll() is None
    assert _paused(system) == ["0"]
    assert system.rig.job(job)["state"] == "PENDING"
    # An admin of the group may: read the log, resume the GPU.
    assert system.berth(C, "admin", "log").returncode == 0
    assert system.berth(C, "resume", "0").returncode == 0
    assert _paused(system) == []
