"""docs/daemon.md and docs/admin.md, `--private` (`[daemon] private = true`): other users'
commands, directories and log paths read `(private)` for anyone but the owner and the admins.
User B tries every way of reading the queue a user has, through the CLI and raw requests
(`queue` with the scheduling model, `show`, `status`, `report`, `queue --start`, the
formats), and finds none of A's command, directory or log path; A and an admin see them.

Needs root (to act as the users), as CI runs the suite.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from test_system_mode import System
from userkit import A, B, C

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")

SECRET = "zq-secret-7x"


@pytest.fixture
def system(daemon: Any) -> System:
    return System(daemon)


def test_private_hides_a_jobs_command_dir_and_logs_from_every_read(system: System) -> None:
    system.start("--private")
    where = os.path.join(system.shared, f"{SECRET}-dir")
    os.mkdir(where)
    os.chmod(where, 0o777)
    out = os.path.join(where, f"{SECRET}-out.log")
    held = system.submit(A, "--hold", "-J", "visible", "-D", where, "-o", out,
                         "--", "sleep", f"600{SECRET}")  # fmt: skip
    waits = system.submit(A, "-J", "later", "-t", "10", "-D", where, "-d", f"afterok:{held}",
                          "--", "echo", SECRET)  # fmt: skip
    seen: dict[str, str] = {}
    for args in (
        ("queue",), ("queue", "--json"), ("queue", "--all", "--json"), ("queue", "--start"),
        ("queue", "--tree"), ("queue", "-o", "%i %j %u %t %M %D %R %r %b"), ("queue", "--users"),
        ("show", str(held)), ("show", "--json", str(held)), ("show", "--json", str(waits)),
        ("status", "--json"), ("report", "--format", "json"),
    ):  # fmt: skip
        r = system.berth(B, *args)
        seen[" ".join(args)] = r.stdout + r.stderr
    for kind, fields in (
        ("queue", {"model": True}), ("queue", {"all": True}), ("show", {"job_id": held}),
        ("show", {"job_id": waits}), ("status", {}),
    ):  # fmt: skip
        seen[f"request {kind} {fields}"] = json.dumps(system.call(B, kind, **fields))
    leaks = {what: text for what, text in seen.items() if SECRET in text}
    assert not leaks, leaks
    assert "visible" in seen["queue"]  # (B does see the queue: users, names, states)
    assert "berth has no field" not in seen["queue -o %i %j %u %t %M %D %R %r %b"]
    for user in (A, C):  # the owner and an admin see it all
        full = system.berth(user, "show", "--json", str(held))
        assert SECRET in full.stdout, full.stdout
