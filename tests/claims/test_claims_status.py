"""`berth status` shows the claims (who, pid, share/memory, since, command) and the waiters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from helpers import wait_until

from berth.api.lease import build_request, claim
from berth.claims.ledger import Ledger


def test_status_shows_claims_and_waiters(fake_gpus: Any) -> None:
    fake_gpus.setup(n=2)
    a, _ = claim(build_request(0.5, mem="30G", only="0"), timeout=0, command="python eval.py")
    b, _ = claim(build_request(1, only="1"), timeout=0, command="python train.py")
    waiter = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "run", "-g", "2", "--", "true"],
        env=fake_gpus.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_until(lambda: Ledger().scan().waiters, timeout=15, message="the waiter")
        r = fake_gpus.berth("status")
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        gpu0 = next(k for k, line in enumerate(lines) if line.strip().startswith("0 "))
        assert "claimed by root pid" in lines[gpu0 + 1]
        assert "share 0.5 mem 30.0G since" in lines[gpu0 + 1]
        assert lines[gpu0 + 1].endswith(": python eval.py")
        assert any("exclusive" in line and "python train.py" in line for line in lines)
        assert "waiting for GPUs (oldest first):" in r.stdout
        assert "wants 2 GPUs (reserves GPU 0,1)" in r.stdout

        data = json.loads(fake_gpus.berth("status", "--json").stdout)["claims"]
        assert sorted((c["index"], c["share"]) for c in data["claims"]) == [(0, 0.5), (1, 1.0)]
        assert data["waiters"][0]["want"] == "2 GPUs"

        # A scribbled body: still shown (rebuilt from the kernel's view), then repaired.
        path = next(c.path for c in Ledger().scan().claims if c.uuid == fake_gpus.uuids[1])
        with open(path, "r+b") as f:
            f.truncate(5)
        r = fake_gpus.berth("status")
        assert "(rebuilt)" in r.stdout and "exclusive" in r.stdout
        assert not any(c.corrupt for c in Ledger().scan().claims)
    finally:
        waiter.kill()
        waiter.communicate()
        a.release()
        b.release()


def test_status_says_why_a_claims_dir_is_refused_and_still_shows_the_gpus(fake_gpus: Any) -> None:
    fake_gpus.setup(n=2)
    os.makedirs(fake_gpus.claims_dir, exist_ok=True)
    os.chmod(fake_gpus.claims_dir, 0o777)  # anyone could remove anyone's claims there
    r = fake_gpus.berth("status")
    assert r.returncode == 0, r.stderr
    assert r.stdout.lstrip().startswith("GPU") and "NVIDIA" in r.stdout
    assert "world-writable but not sticky" in r.stdout and "chmod +t" in r.stdout
    run = fake_gpus.berth("run", "--", "true")
    assert run.returncode == 2 and "not sticky" in run.stderr  # claiming there: refused
