"""docs/admin.md, "Enforcement" and "Threat model": "a pid reused by another process is never
signalled"; "before berth signals a process it takes a pidfd, proves through /proc that this
very process is the one meant, and signals through the pidfd". The enforcer read the
process's uid and start time, then signalled the *pid*: a process that ends between the two
and whose pid goes to another user's process (forced here through tests/pidreuse.py, as a
busy host does within minutes) had that process killed instead.

Needs root (to force the pid's reuse and run the victim as another user), as CI runs it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

import pidreuse
import pytest
from userkit import B, ensure_users

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to reuse a pid")

G = 1 << 30


def test_a_process_that_ends_just_before_its_signal_never_costs_its_pids_next_owner(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from berth.config import Config
    from berth.core.enforce import INTRUSION, Finding
    from berth.daemon.engine import enforce_io
    from berth.daemon.engine import enforcer as module
    from berth.daemon.engine.enforce_io import identity

    ensure_users()
    engine = SimpleNamespace(
        res=SimpleNamespace(cfg=Config()), clock=SimpleNamespace(time=time.time)
    )
    enforcer = module.Enforcer(engine, str(tmp_path / "enforce.log"))  # type: ignore[arg-type]
    classed = subprocess.Popen(["sleep", "60"])
    pid = classed.pid
    ident = identity(pid)
    assert ident is not None
    uid, start = ident
    victims: list[int] = []

    def look_then_lose_it(p: int) -> tuple[int, int] | None:
        seen = identity(p)  # (what /proc says now: the process classed)
        classed.kill()  # ... which ends right after the look,
        classed.wait()
        victims.append(pidreuse.process_at(pid, B))  # its pid taken by B's process
        return seen

    monkeypatch.setattr(module, "identity", look_then_lose_it)  # (the look, wherever it is)
    monkeypatch.setattr(enforce_io, "identity", look_then_lose_it)
    finding = Finding(INTRUSION, 0, pid, start, uid, "root", G, None)
    try:
        assert not enforcer._signal(pid, uid, start, signal.SIGTERM, finding)
        assert victims == [pid] and pidreuse.alive(pid)  # B's process lives
    finally:
        for victim in victims:
            pidreuse.end(victim)
        if classed.poll() is None:
            classed.kill()
            classed.wait()
