"""docs/claims.md, "Where the claims live": everyone can add claims, *only a claim's owner (or
root) can remove it*. That holds in a sticky directory. An admin who makes the ledger
group-writable instead (`install -d -m 0770 -g gpu /run/berth`: "only the GPU group may
claim") gives every member of the group the power to remove another member's claims (no
sticky bit), and then to claim the GPU it held: a GPU handed out twice. Such a directory is
refused as a world-writable one without the sticky bit is, before anything is claimed, by
users and root alike, saying what to do; with the sticky bit it serves.

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
from userkit import USERS, call_as, ensure_group, ensure_user

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")

GROUP = "berth-test-gpu"


@pytest.fixture
def group_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    gid = ensure_group(GROUP)
    for user in USERS:
        ensure_user(user, GROUP)
    top = tempfile.mkdtemp(prefix="berth-grp-")
    os.chmod(top, 0o755)
    claims = os.path.join(top, "claims")
    os.mkdir(claims)
    os.chown(claims, 0, gid)
    os.chmod(claims, 0o770)  # install -d -m 0770 -g GROUP: root's, the group may write
    cfg = os.path.join(top, "config.toml")
    Path(cfg).write_text('[inventory]\ngpus = 4\nmemory = "80G"\n')
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


def _claim() -> Any:
    """Claim GPU 0 (never waiting), then release it."""
    from berth.api.lease import build_request, claim

    lease, _ = claim(build_request(1, only="0"), timeout=0)
    lease.release()
    return lease.indices


def test_a_group_writable_ledger_without_the_sticky_bit_is_refused(group_dir: str) -> None:
    for user in USERS:
        got = call_as(user, _claim)
        assert got.get("error") == "UsageError", got
        assert f"claims directory {group_dir!r} is group-writable but not sticky" in got["message"]
        assert f"chmod +t {group_dir}" in got["message"]
    from berth.errors import UsageError

    with pytest.raises(UsageError, match="group-writable but not sticky"):
        _claim()  # root (and so the system daemon) neither
    assert os.listdir(group_dir) == []  # nothing was claimed
    os.chmod(group_dir, 0o1770)  # sticky: a member removes only their own claims
    assert call_as(USERS[0], _claim) == [0]
    assert _claim() == [0]
