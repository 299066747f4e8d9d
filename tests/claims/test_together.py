"""Claims made together (berth/claims/together.py, the daemon's pass): each stands or
withdraws alone, as if checked after all were made; one look at the ledger for all."""

from __future__ import annotations

import os

import pytest
from claimkit import GIB, logical
from helpers import count_calls

from berth.claims import files
from berth.claims.ledger import Ledger
from berth.claims.together import Want, claim_each

G = logical()


def _alive(ledger: Ledger) -> dict[str, float]:
    return {u: h.share for u, h in ledger.scan().held().items()}


def test_claims_that_fit_all_stand_in_one_look(
    ledger_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(ledger_dir)
    looks = count_calls(monkeypatch, Ledger, "_names_locked")
    wants = [Want([G[0]], 1.0, None), Want([G[1], G[2]], 1.0, None),
             Want([G[3]], 0.5, 10 * GIB), Want([G[3]], 0.5, 10 * GIB)]  # fmt: skip
    got = claim_each(ledger, wants)
    assert looks.n == 1
    assert all(c is not None for c in got)
    assert _alive(ledger) == {G[0].uuid: 1.0, G[1].uuid: 1.0, G[2].uuid: 1.0, G[3].uuid: 1.0}
    for c in got:
        assert c is not None
        c.release()
    assert _alive(ledger) == {}


def test_claims_that_overfill_a_gpu_together_both_withdraw(ledger_dir: str) -> None:
    """Two claimers that each made a file and then looked would both see 1.2 on GPU 0 and
    both withdraw; made together they do the same, and the third, elsewhere, stands."""
    ledger = Ledger(ledger_dir)
    got = claim_each(ledger, [Want([G[0]], 0.6, None), Want([G[0]], 0.6, None),
                              Want([G[1]], 1.0, None)])  # fmt: skip
    assert got[0] is None and got[1] is None and got[2] is not None
    assert _alive(ledger) == {G[1].uuid: 1.0}
    assert sorted(os.listdir(ledger_dir)) == sorted(os.path.basename(p) for p in got[2].paths)


def test_a_claim_beside_a_living_one_that_leaves_no_room_withdraws_alone(ledger_dir: str) -> None:
    ledger = Ledger(ledger_dir)
    other = Ledger(ledger_dir).claim([G[2]], 0.5, 50 * GIB)
    assert other is not None
    got = claim_each(ledger, [Want([G[1], G[2]], 0.5, 40 * GIB), Want([G[3]], 1.0, None)])
    assert got[0] is None and got[1] is not None  # (memory: 50G + 40G > 80G)
    assert _alive(ledger) == {G[2].uuid: 0.5, G[3].uuid: 1.0}


def test_a_failure_half_way_leaves_no_claim(
    ledger_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(ledger_dir)
    made = 0
    real = files.create_locked

    def failing(*a: object) -> int:
        nonlocal made
        made += 1
        if made == 3:
            raise OSError(28, "No space left on device")
        return real(*a)  # type: ignore[arg-type]

    monkeypatch.setattr(files, "create_locked", failing)
    with pytest.raises(OSError):
        claim_each(ledger, [Want([G[0]], 1.0, None), Want([G[1]], 1.0, None),
                            Want([G[2]], 1.0, None)])  # fmt: skip
    assert _alive(ledger) == {}
    assert os.listdir(ledger_dir) == []
