"""Acceptance: the claims of a burst of starts, made together and checked in one look
(berth/claims/together.py), are what the ledger's claims always were: visible to every other
claimer while their starts are being committed, and gone with a daemon killed before that
commit (issue 35)."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

import records
from helpers import alive, wait_until

from berth.claims.ledger import Ledger
from berth.daemon.supervisor import runfile


def test_kill9_between_a_pass_s_claims_and_its_commit_leaves_no_claim_and_runs_none(
    daemon: Any,
) -> None:
    daemon.start()
    ids = [
        daemon.submit(*daemon.workload("--seconds", "0.2", "--record", daemon.record), hold=True)
        for _ in range(4)
    ]
    ledger = Ledger(daemon.fake.claims_dir)
    db = sqlite3.connect(os.path.join(daemon.state_dir, "berth.db"), isolation_level=None)
    db.execute("BEGIN IMMEDIATE")  # the daemon's next commit waits (busy_timeout 5 s)
    try:
        with daemon.client() as c:
            c.send("release_job", job_ids=ids)  # one pass starts all four: one claim look
            run_dir = os.path.join(daemon.state_dir, "run")

            def supervisors() -> list[int] | None:
                names = [n for n in os.listdir(run_dir) if not n.startswith("spare.")]
                pids = [runfile.read_run_file(os.path.join(run_dir, n)).get("sup") for n in names]
                return pids if len(pids) == 4 and all(pids) else None

            sups = wait_until(
                supervisors, timeout=4, message="the burst's attempts reach their supervisors"
            )
            # While their starts await the commit, every GPU is claimed for everybody else:
            held = ledger.scan().held()
            assert sorted(h.share for h in held.values()) == [1.0] * 4
            assert ledger.try_claim([next(iter(held))]) is None
            daemon.kill9()
    finally:
        db.execute("ROLLBACK")
        db.close()
    wait_until(
        lambda: not [p for p in sups if p and alive(p)],
        timeout=10, message="the gated supervisors exit",
    )  # fmt: skip
    # The claims died with their holders (the daemon, the supervisors at their gates):
    assert ledger.scan().held() == {}
    assert not [e for e in records.read(daemon.record) if e["event"] == "start"]
    daemon.start()
    rows = {r["id"]: r for r in daemon.call("queue", all=True)["jobs"]}
    assert [rows[i]["state"] for i in ids] == ["PENDING"] * 4
    daemon.call("release_job", job_ids=ids)
    rows = daemon.wait_done(ids)
    assert {r["state"] for r in rows.values()} == {"COMPLETED"}
    started = sorted(int(e["job"]) for e in records.read(daemon.record) if e["event"] == "start")
    assert started == ids  # once each
    assert ledger.scan().held() == {}
