"""docs/claims.md, "`berth release` (admin)": a member of `[claims] admin_group` who is not
root cannot signal another user's processes nor remove their claim files (the ledger is
sticky): only root can end another user's claim made outside the queue. `berth release 0
--yes` run by such a member said "ended 1 claim(s)" and exited 0 while the claim lived on
and its holder ran: an admin told the GPU was free when it was not. It is refused before
anything is done, saying to run it as root; root ends it.

Needs root (to make the users and run as them), as CI runs the suite.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until
from userkit import ADMINS, A, AsUser, C, berth_as, ensure_users

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


@pytest.fixture
def ledger(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    ensure_users()
    top = tempfile.mkdtemp(prefix="berth-rel-")
    os.chmod(top, 0o755)
    claims = os.path.join(top, "claims")
    os.mkdir(claims)
    os.chmod(claims, 0o1777)  # as /run/berth
    cfg = os.path.join(top, "config.toml")
    Path(cfg).write_text(
        f'[inventory]\ngpus = 4\nmemory = "80G"\n[claims]\nadmin_group = "{ADMINS}"\n'
    )
    os.chmod(cfg, 0o644)
    monkeypatch.setenv("BERTH_CONFIG", cfg)
    monkeypatch.setenv("BERTH_CLAIMS_DIR", claims)
    from berth import config

    config.reset()
    try:
        yield claims
    finally:
        config.reset()
        shutil.rmtree(top, ignore_errors=True)


def _hold() -> Any:
    from berth.api.lease import build_request, claim

    lease, _ = claim(build_request(1, only="0"), timeout=0)
    globals()["_held"] = lease  # (held until the child is killed)
    return lease.indices


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # (a zombie: ended)
    except FileNotFoundError:
        return False


def test_an_admin_group_member_is_told_to_be_root_and_nothing_is_claimed_ended(
    ledger: str,
) -> None:
    users = AsUser()
    try:
        holder, got = users.start(A, _hold, hold=True)
        assert got == [0]
        before = sorted(os.listdir(ledger))
        out = berth_as(C, "release", "0", "--yes", "--grace", "1")
        assert out.returncode == 4, (out.returncode, out.stdout, out.stderr)
        assert f"GPU 0 is held by {A}" in out.stderr
        assert "only root can end another user's claim" in out.stderr, out.stderr
        assert "sudo berth release 0" in out.stderr
        assert "ended" not in out.stdout
        assert _alive(holder) and sorted(os.listdir(ledger)) == before  # nothing done
        from berth.cli.main import main

        assert main(["release", "0", "--yes", "--grace", "1"]) == 0  # root ends it
        wait_until(lambda: not _alive(holder) or None, timeout=10, message="A's holder ends")
    finally:
        users.cleanup()
