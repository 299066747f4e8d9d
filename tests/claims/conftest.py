"""Fixtures of the claims tests: a private ledger directory, holder processes, other users."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from claimkit import Holders
from userkit import USERS, AsUser, ensure_user


@pytest.fixture
def ledger_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    path = tmp_path / "claims"
    path.mkdir()
    monkeypatch.setenv("BERTH_CLAIMS_DIR", str(path))
    return str(path)


@pytest.fixture
def holders(ledger_dir: str) -> Iterator[Holders]:
    h = Holders(ledger_dir)
    try:
        yield h
    finally:
        h.cleanup()


@pytest.fixture
def shared(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, AsUser]]:
    """(claims dir, AsUser): the ledger directory does not exist yet; its parent is shared
    like /tmp (mode 1777), so the first user to claim creates it. A config declares 4 GPUs."""
    if os.geteuid() != 0:
        pytest.fail("this test needs root (CI runs as root): it creates users")
    for u in USERS:
        ensure_user(u)
    top = tempfile.mkdtemp(prefix="berth-users-")
    os.chmod(top, 0o1777)
    claims = os.path.join(top, "claims")
    cfg = os.path.join(top, "config.toml")
    Path(cfg).write_text('[inventory]\ngpus = 4\nmemory = "80G"\n')
    os.chmod(cfg, 0o644)
    monkeypatch.setenv("BERTH_CONFIG", cfg)
    monkeypatch.setenv("BERTH_CLAIMS_DIR", claims)
    from berth import config

    config.reset()
    runner = AsUser()
    try:
        yield claims, runner
    finally:
        runner.cleanup()
        config.reset()
        shutil.rmtree(top, ignore_errors=True)
