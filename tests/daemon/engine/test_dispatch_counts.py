"""What one end and the next start cost the daemon's engine, counted (issue 35: the CPU of
the dispatch path): 8 GPUs full of running jobs, then one ends and the pass it kicks starts
the next, again and again, with the ledger's listing kept as the daemon keeps it. Per end
and start: no probe of a claim file (none but our jobs' is there), one lookup in the ledger
(the withdrawal's check of the ended claim's owner), one claim name parsed (the new one),
the host's cores not read again, and the GPUs' capacity not built again (kept between
passes: berth/daemon/engine/kept.py)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from enginekit import EngineRig
from helpers import Calls

from berth.claims import files, listing
from berth.claims.ledger import Ledger
from berth.core.capacity import Capacity

ROUNDS = 12


def _count(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, under: str = "") -> Calls:
    calls, real = Calls(), getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        if not under or (args and isinstance(args[0], str) and args[0].startswith(under)):
            calls.n += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_an_end_and_the_next_start_look_at_no_claim_file_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = EngineRig(tmp_path, gpus=8)
    try:
        engine, procs = rig.engine, rig.procs
        engine.res.ledger = ledger = Ledger(rig.ledger.path, keep=True)  # (the daemon's)
        engine.pauses.queue = True
        ids = [rig.submit("true") for _ in range(8 + ROUNDS)]
        engine.pauses.queue = False
        rig.turn()
        assert len(procs.running()) == 8
        probes = _count(monkeypatch, files, "probe", ledger.path)
        lookups = _count(monkeypatch, os, "lstat", ledger.path)
        parses = _count(monkeypatch, files, "parse_claim_name")
        monkeypatch.setattr(listing, "parse_claim_name", files.parse_claim_name, raising=False)
        cores = _count(monkeypatch, os, "cpu_count")
        built = _count(monkeypatch, Capacity, "__init__")
        for _ in range(ROUNDS):
            engine._next_pass = 0.0  # (ends far apart: no pass is paced)
            procs._end(procs.running()[0], rc=0)
            rig.loop.run_until_complete(asyncio.sleep(0))  # (the pass the end kicks)
            rig.loop.run_until_complete(asyncio.sleep(0))  # (its commit's follow-ups)
            procs.poll_gates()
            assert len(procs.running()) == 8
        # (were 12, 24, 192, 12 and 12: the new claim's probe, the lookup of its name as its
        # event was applied, every name parsed by each look, the cores read by each pass,
        # the GPUs' capacity built by each pass and every running job charged to it)
        assert (probes.n, lookups.n, parses.n, cores.n, built.n) == (0, ROUNDS, ROUNDS, 0, 0)
        assert [rig.state(i) for i in ids[:ROUNDS]] == ["COMPLETED"] * ROUNDS
        held = ledger.scan().held()  # (the 8 running, each its own GPU)
        assert sorted(h.share for h in held.values()) == [1.0] * 8
    finally:
        rig.close()
