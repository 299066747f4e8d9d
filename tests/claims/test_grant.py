"""Which claims of a GPU stand (berth.claims.grant): those that fit with the claims placed
before them (file ctime); a claim made by hand that overfills a GPU is not granted. And the
kernel facts the order rests on: the rename that places a claim file sets its ctime, and no
other user can move it (issue 41.1).

The last test needs root (to act as another user), as CI runs the suite.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

import pytest
from userkit import A, B, call_as, ensure_users

from berth.claims import files
from berth.claims.grant import Placed, stand

G = 1 << 30
COARSE = getattr(time, "CLOCK_REALTIME_COARSE", 5)
CARD = 80 * G


def test_a_claim_placed_after_an_exclusive_one_is_not_granted() -> None:
    out = stand([Placed("claim h", 20, 1.0, 30 * G), Placed("job 1", 10, 1.0, 0)], CARD)
    assert out["job 1"] is None
    assert out["claim h"] == (
        "placed after job 1's exclusive claim: together they overfill the GPU (shares)"
    )


def test_two_halves_stand_a_third_does_not_whatever_order_they_are_given_in() -> None:
    claims = [Placed("a", 1, 0.5, 0), Placed("b", 2, 0.5, 0), Placed("c", 3, 0.5, 0)]
    for given in (claims, claims[::-1], [claims[2], claims[0], claims[1]]):
        out = stand(given, CARD)
        assert out["a"] is None and out["b"] is None
        assert out["c"] == (
            "placed after a's 0.5 share and b's 0.5 share: together they overfill the GPU (shares)"
        )


def test_declared_memory_over_the_card_is_not_granted() -> None:
    out = stand([Placed("a", 1, 0.5, 60 * G), Placed("b", 2, 0.25, 30 * G)], CARD)
    assert out["a"] is None
    assert (
        out["b"] is not None
        and out["b"].endswith("(memory)")
        and "a's 0.5 share (60.0G)" in out["b"]
    )
    alone = stand([Placed("x", 1, 0.5, 90 * G)], CARD)
    assert alone["x"] == "declares 90.0G, more than the card's 80.0G"
    assert stand([Placed("x", 1, 0.5, 90 * G)], None)["x"] is None  # (memory unknown)


def test_what_is_not_granted_counts_against_nobody() -> None:
    """An exclusive claim ungranted behind another; once that one has gone, it stands,
    and a share placed after it does not."""
    first, second = Placed("first", 1, 1.0, 0), Placed("second", 2, 1.0, 0)
    later = Placed("later", 3, 0.5, 0)
    out = stand([first, second, later], CARD)
    assert out["second"] is not None and out["later"] is not None
    assert "first's exclusive claim" in out["later"] and "second" not in out["later"]
    out = stand([second, later], CARD)
    assert out["second"] is None and out["later"] is not None


def test_a_tie_that_overfills_grants_neither_one_that_fits_grants_both() -> None:
    out = stand([Placed("legit", 5, 0.5, 0), Placed("hand", 5, 1.0, 0)], CARD)
    assert out["legit"] == (
        "placed at the same moment as hand's exclusive claim: together they overfill the GPU "
        "(shares)"
    )
    assert out["hand"] is not None and "legit's 0.5 share" in out["hand"]
    out = stand([Placed("a", 5, 0.5, 0), Placed("b", 5, 0.5, 0)], CARD)
    assert out == {"a": None, "b": None}


def test_a_tie_is_broken_by_the_look_that_first_saw_it_and_by_the_daemons_own() -> None:
    """Equal ctimes: the file a look saw first was there before the other; the daemon's own
    claim (checked by the daemon itself) goes before any it did not make."""
    out = stand([Placed("hand", 5, 1.0, 0, seen=1), Placed("job 1", 5, 1.0, 0, seen=2)], CARD)
    assert out["hand"] is None and out["job 1"] is not None
    out = stand([Placed("hand", 5, 1.0, 0), Placed("job 1", 5, 1.0, 0, proper=True)], CARD)
    assert out["job 1"] is None
    assert out["hand"] == (
        "placed after job 1's exclusive claim: together they overfill the GPU (shares)"
    )


def test_a_nested_claim_uses_the_capacity_of_the_one_it_is_within() -> None:
    """A script run by `berth run` (its parent's claim held by it too) claims the same GPU."""
    parent = Placed("claim p", 1, 1.0, 0)
    nested = Placed("claim n", 2, 1.0, 0, within=frozenset({"claim p"}))
    assert stand([parent, nested], CARD) == {"claim p": None, "claim n": None}
    stranger = Placed("claim s", 2, 1.0, 0, within=frozenset({"claim q"}))
    assert stand([parent, stranger], CARD)["claim s"] is not None


def test_the_rename_that_places_a_claim_file_sets_its_ctime(tmp_path: Any) -> None:
    """create_locked writes under a temporary name and renames into place: the rename, not
    the creation, dates the claim (a file made long before and renamed in is placed now)."""
    made = tmp_path / "t.early"
    made.write_bytes(b"{}")
    before = made.stat().st_ctime_ns
    time.sleep(0.05)
    os.rename(made, tmp_path / "c.placed")
    assert (tmp_path / "c.placed").stat().st_ctime_ns > before
    start = time.clock_gettime_ns(COARSE)
    fd = files.create_locked(str(tmp_path), "c.u.abc.1000.0", b"{}", "abc")
    try:
        assert os.fstat(fd).st_ctime_ns >= start
    finally:
        os.close(fd)


def _make_claim(top: str) -> Any:
    def make() -> list[int]:
        lease = files.new_lease_id()
        tmp_made = time.clock_gettime_ns(COARSE)  # (the clock file times are read from)
        fd = files.create_locked(top, files.claim_name("u", lease, 1.0, 0), b"{}", lease)
        return [fd, tmp_made, os.fstat(fd).st_ctime_ns, os.fstat(fd).st_ino]

    return make


def test_nobody_else_can_move_a_claim_files_ctime() -> None:
    """In the sticky ledger directory, another user can neither chmod, touch, rename, link
    nor replace a claim file of A's: its ctime (when it was placed) stays."""
    if os.geteuid() != 0:
        pytest.fail("this test needs root (CI runs as root): it creates users")
    ensure_users()
    top = tempfile.mkdtemp(prefix="berth-ctime-")
    os.chmod(top, 0o1777)
    _, made, ctime, ino = call_as(A, _make_claim(top))
    assert ctime >= made  # the rename into place set it
    (name,) = [n for n in os.listdir(top) if n.startswith(files.CLAIM)]
    path = os.path.join(top, name)

    def tamper() -> list[str]:
        failed = []
        for what, act in (
            ("chmod", lambda: os.chmod(path, 0o600)),
            ("touch", lambda: os.utime(path)),
            ("rename", lambda: os.rename(path, path + "x")),
            ("replace", lambda: (open(path + "y", "w").close(), os.rename(path + "y", path))),
            ("link", lambda: os.link(path, os.path.join(top, "mine"))),
        ):
            try:
                act()
            except PermissionError:
                failed.append(what)
        return failed

    with open("/proc/sys/fs/protected_hardlinks") as f:
        protected = f.read().strip() == "1"
    refused = call_as(B, tamper)
    assert refused == ["chmod", "touch", "rename", "replace"] + (["link"] if protected else [])
    st = os.stat(path)
    shutil.rmtree(top)
    assert st.st_ino == ino and (st.st_ctime_ns == ctime or not protected)
