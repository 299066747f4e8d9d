"""Fixtures of the claims tests: a private ledger directory, holder processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from claimkit import Holders


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
