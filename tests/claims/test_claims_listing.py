"""The daemon's kept listing of the ledger directory (berth/claims/listing.py, issue 41.2):
names follow the kernel's events without listing again, each new name's owner is learned once
and an owner's names past the cap are set aside, and a name set aside is forgotten at its
first event."""

from __future__ import annotations

import os

from berth.claims.listing import Listing

NOBODY = 65534


def _make(d: str, name: str, uid: int = 0) -> None:
    path = os.path.join(d, name)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
    os.chown(path, uid, uid)


def test_names_follow_events_without_a_second_listing(tmp_path: object) -> None:
    d = str(tmp_path)
    _make(d, "c.G.aaaa.1000.0")
    listing = Listing(d, cap=10)
    try:
        assert set(listing.names()) == {"c.G.aaaa.1000.0"}
        _make(d, "t.bbbb.0.1")
        _make(d, "not-a-ledger-name")
        os.rename(os.path.join(d, "t.bbbb.0.1"), os.path.join(d, "c.G.bbbb.1000.0"))
        os.unlink(os.path.join(d, "c.G.aaaa.1000.0"))
        names = listing.names()
        assert set(names) == {"c.G.bbbb.1000.0"}
        assert names["c.G.bbbb.1000.0"] == os.lstat(os.path.join(d, "c.G.bbbb.1000.0")).st_ino
        assert listing.relisted == 1
    finally:
        listing.close()


def test_an_owners_names_past_the_cap_are_set_aside_until_they_change(tmp_path: object) -> None:
    d = str(tmp_path)
    listing = Listing(d, cap=3)
    try:
        listing.names()
        for i in range(5):
            _make(d, f"c.G.n{i}.1000.0", NOBODY)
        _make(d, "c.G.root.1000.0")  # (root's: never capped)
        considered = set(listing.considered())
        assert considered == {"c.G.n0.1000.0", "c.G.n1.1000.0", "c.G.n2.1000.0", "c.G.root.1000.0"}
        os.unlink(os.path.join(d, "c.G.n0.1000.0"))
        _make(d, "c.G.n5.1000.0", NOBODY)  # room again under the cap
        assert "c.G.n5.1000.0" in listing.considered()
        listing.aside["c.G.n1.1000.0"] = listing.names()["c.G.n1.1000.0"]  # (as a scan does)
        assert "c.G.n1.1000.0" not in listing.considered()
        os.unlink(os.path.join(d, "c.G.n1.1000.0"))
        _make(d, "c.G.n1.1000.0")  # a new file under the name: looked at again
        assert "c.G.n1.1000.0" in listing.considered()
        assert listing.relisted == 1
    finally:
        listing.close()


def test_a_fresh_listing_keeps_what_it_learned_of_the_same_files(tmp_path: object) -> None:
    """Lost events (an overflowing queue: a flood of planted names) mean a fresh listing,
    not a fresh look at every owner: names still there as they were stay set aside."""
    d = str(tmp_path)
    listing = Listing(d, cap=2)
    try:
        listing.names()
        for i in range(4):
            _make(d, f"c.G.n{i}.1000.0", NOBODY)
        assert len(listing.considered()) == 2
        listing._stale = True  # (what an IN_Q_OVERFLOW does)
        os.unlink(os.path.join(d, "c.G.n3.1000.0"))  # (its event lost with the rest)
        assert set(listing.considered()) == {"c.G.n0.1000.0", "c.G.n1.1000.0"}
        assert listing.relisted == 2 and listing.count == {NOBODY: 2}
        os.unlink(os.path.join(d, "c.G.n0.1000.0"))
        _make(d, "c.G.n4.1000.0", NOBODY)
        assert set(listing.considered()) == {"c.G.n1.1000.0", "c.G.n4.1000.0"}
    finally:
        listing.close()
