"""Claims across Unix users: they see each other's claims; a user can neither remove, rewrite,
replace nor release another's; root's `berth release` can end them.

The tests create two users (berth-test-a, berth-test-b) and run code as them in forked
children (tests/userkit.py; the ``shared`` fixture is in conftest.py). The GPUs are a
declared inventory, so no NVML (and no root-only fake state file) is involved.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers import wait_until


def _claim(only: str) -> Any:
    from berth.api.lease import build_request, claim

    lease, _ = claim(build_request(1, only=only), timeout=0)
    return lease.paths


def _claims() -> Any:
    from berth.claims.ledger import Ledger

    return sorted((c.index, c.user) for c in Ledger().scan().claims)


def test_two_users_see_but_cannot_touch_each_others_claims(shared: Any) -> None:
    claims_dir, run = shared
    a_pid, (a_path,) = run.start("berth-test-a", lambda: _claim("0"), hold=True)
    assert os.stat(claims_dir).st_mode & 0o7777 == 0o1777  # created shared, by user a
    _, (_b_path,) = run.start("berth-test-b", lambda: _claim("1"), hold=True)
    assert Path(a_path).stat().st_uid == pwd.getpwnam("berth-test-a").pw_uid

    def b_tries() -> Any:
        from berth.claims import files
        from berth.cli.main import main
        from berth.errors import WaitTimeout

        seen = _claims()
        try:
            _claim("0")
            took = True
        except WaitTimeout:
            took = False
        outcomes = {}
        for what, act in (
            ("unlink", lambda: os.unlink(a_path)),
            ("write", lambda: open(a_path, "r+b").close()),
            ("replace", lambda: os.close(files.create_locked(claims_dir, os.path.basename(a_path), b"{}", "x"))),
        ):  # fmt: skip
            try:
                act()
                outcomes[what] = "done"
            except PermissionError:
                outcomes[what] = "refused"
        return {
            "seen": seen,
            "took": took,
            "outcomes": outcomes,
            "release": main(["release", "0", "--yes"]),
        }

    _, got = run.start("berth-test-b", b_tries)
    assert got["seen"] == [[0, "berth-test-a"], [1, "berth-test-b"]]
    assert got["took"] is False
    assert got["outcomes"] == {"unlink": "refused", "write": "refused", "replace": "refused"}
    assert got["release"] == 4  # Refused
    _, seen_by_a = run.start("berth-test-a", _claims)
    assert seen_by_a == [[0, "berth-test-a"], [1, "berth-test-b"]]

    # root, the admin, may end a's claim: SIGTERM to its holder, and the GPU is free.
    r = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "release", "0", "--yes", "--grace", "5"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "berth-test-a" in r.stdout and "ended 1 claim" in r.stdout
    wait_until(
        lambda: os.waitpid(a_pid, os.WNOHANG)[0] == a_pid, timeout=5, message="a's holder to end"
    )
    run.children.remove(a_pid)
    assert _claims() == [(1, "berth-test-b")]


def test_release_asks_first_and_users_may_release_their_own(shared: Any) -> None:
    _claims_dir, run = shared
    run.start("berth-test-a", lambda: _claim("2"), hold=True)
    no = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "release", "2"],
        input="n\n", capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert no.returncode == 1 and "[y/N]" in no.stdout and "nothing done" in no.stdout
    assert _claims() == [(2, "berth-test-a")]

    def own() -> Any:
        from berth.cli.main import main

        return main(["release", "2", "--yes", "--grace", "5"])

    _, code = run.start("berth-test-a", own)
    assert code == 0
    assert _claims() == []
