"""A start that meets a limit of the system (no descriptor, memory or process left: EMFILE,
ENFILE, ENOMEM, EAGAIN) never ran its command: the engine takes it back, the job waits
(``SystemLimit``), no attempt counted, and starts once the limit is lifted
(berth/daemon/engine/exhausted.py; DESIGN.md invariant 10). Driven through the engine's ports
(tests/daemon/enginekit.py): each place a start can meet the limit, on the daemon's side and
on its supervisor's."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from enginekit import EngineRig

from berth.daemon.engine import exhausted, front_reads


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[EngineRig]:
    r = EngineRig(tmp_path, gpus=1)
    try:
        yield r
    finally:
        r.close()


def _emfile(*_: Any, **__: Any) -> Any:
    raise OSError(errno.EMFILE, "Too many open files")


def _waits_then_runs(rig: EngineRig, a: int, lift: Any) -> None:
    """``a`` waits for the limit (never FAILED, no attempt), then runs once ``lift()``."""
    assert rig.state(a) == "PENDING"
    assert not rig.engine.jobs[a].attempts  # (no attempt counted, no retry spent)
    assert (rig.engine.reason(a) or "").startswith("SystemLimit: "), rig.engine.reason(a)
    assert "Too many open files" in (rig.engine.reason(a) or "")
    assert rig.engine.diskfull.exhausted and not rig.engine.diskfull.disk_full
    assert front_reads.gpus(rig.engine)["starts_exhausted"] is True  # (/metrics' gauge)
    assert "limit of the system" in str(rig.engine.diskfull.note())  # (berth status' line)
    assert "FAILED" not in [e.state.value for e in rig.engine.jobs[a].history]
    lift()
    rig.until(lambda: (a, 1) in rig.procs.started, "it starts once the limit is lifted")
    assert len(rig.engine.jobs[a].attempts) == 1
    rig.until(lambda: not rig.engine.diskfull.exhausted, "starts go through again")
    assert front_reads.gpus(rig.engine)["starts_exhausted"] is False


def test_a_hand_over_without_descriptors_waits(rig: EngineRig, monkeypatch: Any) -> None:
    start = rig.procs.start
    monkeypatch.setattr(rig.procs, "start", _emfile)  # (its run file, its channel)
    a = rig.submit("sleep", "5")
    rig.turn()
    _waits_then_runs(rig, a, lambda: monkeypatch.setattr(rig.procs, "start", start))


def test_a_start_gate_without_descriptors_waits(rig: EngineRig, monkeypatch: Any) -> None:
    gate = rig.procs.gate
    monkeypatch.setattr(rig.procs, "gate", _emfile)  # (the pipe of its start gate)
    a = rig.submit("sleep", "5")
    rig.turn()
    _waits_then_runs(rig, a, lambda: monkeypatch.setattr(rig.procs, "gate", gate))


def test_claims_without_descriptors_wait_without_a_busy_loop(
    rig: EngineRig, monkeypatch: Any
) -> None:
    from berth.daemon.engine import diskfull as engine_mod

    claim_each = engine_mod.claim_each
    calls = []

    def short(*args: Any) -> Any:
        calls.append(1)
        _emfile()

    monkeypatch.setattr(engine_mod, "claim_each", short)
    a = rig.submit("sleep", "5")
    rig.turn()
    for _ in range(20):
        rig.engine.kick()  # (events keep coming: no start is tried until the pause is over)
        rig.turn()
    assert len(calls) == 1, calls
    assert rig.state(a) == "PENDING"
    assert rig.engine.reason(a) is not None and "SystemLimit" in str(rig.engine.reason(a))
    monkeypatch.setattr(engine_mod, "claim_each", claim_each)
    rig.until(lambda: (a, 1) in rig.procs.started, "it starts once the limit is lifted")


def test_a_supervisor_that_cannot_be_forked_waits(rig: EngineRig) -> None:
    a = rig.submit("sleep", "5")
    assert rig.procs.handed == [(a, 1)]
    attempt = rig.procs.attempts[f"/fake/run/{a}.1"]
    rig.procs._release(attempt)  # (the fork server could not fork it)
    rig.procs.on_gone(a, 1, "cannot start a supervisor: Resource temporarily unavailable", False)
    rig.turn()
    assert rig.state(a) == "PENDING"
    assert "SystemLimit" in str(rig.engine.reason(a))
    assert "FAILED" not in [e.state.value for e in rig.engine.jobs[a].history]
    rig.until(lambda: (a, 2) in rig.procs.started or (a, 1) in rig.procs.started, "it starts")
    assert len(rig.engine.jobs[a].attempts) == 1


def test_a_supervisors_own_limit_holds_back_only_its_job(rig: EngineRig) -> None:
    a = rig.submit("sleep", "5")
    attempt = rig.procs.attempts[f"/fake/run/{a}.1"]
    rig.procs._release(attempt)
    rig.procs.on_done(a, 1, {
        "rc": 127, "unstarted": True, "exhausted": "EMFILE",
        "nospace": "cannot open log file '/x': Too many open files", "nospace_path": None,
    })  # fmt: skip
    b = rig.submit("sleep", "5")  # another's job starts meanwhile: nothing holds it back
    rig.turn()
    job = rig.engine.jobs[a]
    assert job.state.value == "PENDING" and not job.attempts
    assert job.not_before == pytest.approx(rig.clock.time() + exhausted.ALONE_WAIT)
    assert not rig.engine.diskfull.full
    assert (b, 1) in rig.procs.handed
    rig.advance_to(rig.t0 + 6)  # (b ends at 5; a's pause is over)
    assert (a, 2) in rig.procs.handed or (a, 1) in rig.procs.started
    assert "FAILED" not in [e.state.value for e in rig.engine.jobs[a].history]
