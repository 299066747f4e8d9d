"""What a claim's check looks at (issue 35: the CPU of one end and the next start). A claim
made with the daemon's kept listing knows its own files without looking at them again: they
are the names of its lease whose inode is a file it made (it holds their locks), so no
probe (open, fstat, two flocks, close) and no lookup of their names as their events are
applied; a name is parsed once while it is listed, not by every scan, check and withdrawal.
What the check decides is unchanged: another's file on the GPU, one of its files removed
while it was made, or another file named with its lease, each still makes it withdraw."""

from __future__ import annotations

import os
from typing import Any

import pytest
from claimkit import logical
from helpers import Calls

from berth.claims import files, listing
from berth.claims.ledger import Ledger
from berth.claims.together import Want, claim_each

G = logical(8)


def _count(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, path: str) -> Calls:
    """Count the calls of ``module.name`` whose first argument is a path under ``path``."""
    calls, real = Calls(), getattr(module, name)

    def counted(first: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(first, str) and first.startswith(path):
            calls.n += 1
        return real(first, *args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def _parses(monkeypatch: pytest.MonkeyPatch) -> Calls:
    calls, real = Calls(), files.parse_claim_name

    def counted(name: str) -> Any:
        calls.n += 1
        return real(name)

    monkeypatch.setattr(files, "parse_claim_name", counted)
    monkeypatch.setattr(listing, "parse_claim_name", counted, raising=False)
    return calls


def test_a_pass_s_claims_neither_probe_nor_look_up_their_own_files(
    ledger_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(ledger_dir, keep=True)
    ledger.scan()  # (listed once: events from now on)
    probes = count_probes(monkeypatch, ledger_dir)
    lookups = _count(monkeypatch, os, "lstat", ledger_dir)
    got = claim_each(ledger, [Want([G[0]], 1.0, None), Want([G[1], G[2]], 1.0, None)])
    assert all(c is not None for c in got)
    assert (probes.n, lookups.n) == (0, 0)  # (were 3 and 3: one of each a file made)
    assert set(ledger.scan().held()) == {G[0].uuid, G[1].uuid, G[2].uuid}
    listed = ledger.listing
    assert listed is not None and listed.relisted == 1
    for c in got:  # (learned from their events: the owner and inode a lookup would give)
        assert c is not None
        for path, ident in zip(c.paths, c.idents, strict=True):
            name = os.path.basename(path)
            assert listed.names()[name] == ident[1] == os.lstat(path).st_ino
            assert listed.owner[name] == os.geteuid()
        c.release()


def count_probes(monkeypatch: pytest.MonkeyPatch, path: str) -> Calls:
    return _count(monkeypatch, files, "probe", path)


def test_another_s_claim_on_the_gpu_is_still_probed_and_seen(
    ledger_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(ledger_dir, keep=True)
    ledger.scan()
    other = Ledger(ledger_dir).claim([G[0]], 0.6, None)
    assert other is not None
    probes = count_probes(monkeypatch, ledger_dir)
    got = claim_each(ledger, [Want([G[0]], 0.6, None), Want([G[1]], 1.0, None)])
    assert probes.n == 1  # (the other's file: alive, counted)
    assert got[0] is None and got[1] is not None
    got[1].release()
    other.release()


def test_a_file_of_the_claim_removed_while_it_was_made_withdraws_it(
    ledger_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(ledger_dir, keep=True)
    ledger.scan()
    real = Ledger._names_locked

    def removed_first(self: Ledger, clean: bool = False) -> dict[str, int]:
        for name in os.listdir(ledger_dir):  # (root, or its owner, removed one of them)
            if name.startswith(f"{files.CLAIM}{G[2].uuid}."):
                os.unlink(os.path.join(ledger_dir, name))
        return real(self, clean)

    monkeypatch.setattr(Ledger, "_names_locked", removed_first)
    got = claim_each(ledger, [Want([G[1], G[2]], 1.0, None), Want([G[3]], 1.0, None)])
    assert got[0] is None and got[1] is not None  # (all its GPUs or none: G1's went too)
    monkeypatch.setattr(Ledger, "_names_locked", real)
    assert set(ledger.scan().held()) == {G[3].uuid}
    got[1].release()


def test_another_file_named_with_the_claim_s_lease_is_not_taken_for_its_own(
    ledger_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A living file on the same GPU under the claim's own lease id, but not a file it made
    (another inode): probed and counted as another's, as it was before."""
    ledger = Ledger(ledger_dir, keep=True)
    ledger.scan()
    monkeypatch.setattr(files, "new_lease_id", lambda: "abcdef012345")
    other = Ledger(ledger_dir).claim([G[0]], 0.6, 1 << 20)  # (a name of its own: its memory)
    assert other is not None and other.lease_id == "abcdef012345"
    probes = count_probes(monkeypatch, ledger_dir)
    got = claim_each(ledger, [Want([G[0]], 0.6, None)])
    assert probes.n == 1 and got == [None]  # (0.6 + 0.6 on GPU 0: it withdraws)
    other.release()


def test_each_name_is_parsed_once_while_it_is_listed(
    ledger_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start and an end, again and again, beside 7 running claims: each pass's scan, its
    claim's check and the end's withdrawal parse only the names they have not parsed."""
    ledger = Ledger(ledger_dir, keep=True)
    running = [c for c in claim_each(ledger, [Want([g], 1.0, None) for g in G[:7]])]
    assert all(c is not None for c in running)
    ledger.scan()
    parses = _parses(monkeypatch)
    for _ in range(10):
        ledger.scan()  # (the pass: what others use)
        [new] = claim_each(ledger, [Want([G[7]], 1.0, None)])
        assert new is not None
        ledger.scan()
        assert ledger.withdraw(new.lease_id) == 1  # (its end)
        new.detach()
    assert parses.n == 10  # (each new name once; was 240: every name, by each look)
    assert set(ledger.scan().held()) == {g.uuid for g in G[:7]}
    for c in running:
        assert c is not None
        c.release()
