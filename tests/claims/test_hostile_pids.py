"""A pid is never an identity (issue 20, invariant 7): mallory (berth-test-b) makes
/proc/locks name a pid of hers that dies, waits for that number to go to another user's
process, and gets `berth release` (run by the admin) to kill that process for her.

Needs root (CI runs as root): users are created, code runs as them (tests/userkit.py),
a pid is reused on purpose (tests/pidreuse.py).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from helpers import wait_until
from pidreuse import alive, end, gone, process_at

A, MALLORY = "berth-test-a", "berth-test-b"


def _claim_and_hand_the_lock_on() -> Any:
    """Claim GPU 0, then lock the claim file from a short-lived child that passes the lock
    on to a long-lived grandchild and exits: /proc/locks names the dead child. Returns the
    dead pid and the grandchild's."""
    import fcntl
    import time

    from berth.api.lease import build_request, claim

    lease, _ = claim(build_request(1, only="0"), timeout=0)
    path = lease.paths[0]
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - child
        os.close(r)
        fd = os.open(path, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_SH)
        grandchild = os.fork()
        if grandchild == 0:
            os.close(w)
            os.setsid()
            time.sleep(600)
        os.write(w, str(grandchild).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        grandchild = int(f.read())
    os.waitpid(child, 0)
    return [child, grandchild]



def test_release_does_not_kill_whoever_got_a_pid_proc_locks_names(
    shared: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from berth.claims import files
    from berth.claims.ledger import Ledger
    from berth.cli.main import main

    _, run = shared
    _, (dead, grandchild) = run.start(MALLORY, _claim_and_hand_the_lock_on, hold=True)
    victim = process_at(dead, A)  # the number comes round to A's process
    try:
        (c,) = Ledger().scan().claims
        assert dead in files.lock_owners(os.stat(c.path))  # what /proc/locks says
        assert main(["release", "0", "--yes", "--grace", "5"]) == 0  # the admin (root)
        assert "ended 1 claim" in capsys.readouterr().out
        assert alive(victim), "berth release killed A's process: its pid was in /proc/locks"
        wait_until(lambda: gone(grandchild), message="mallory's real holder to end")
        assert Ledger().scan().claims == []
    finally:
        end(victim)
        try:
            os.kill(grandchild, 9)
        except ProcessLookupError:
            pass
