"""Mallory (berth-test-b), an unprivileged user of the host, attacks the shared ledger: she
plants a ``.lock`` nobody can open, a symlink, holds a lock for ever, plants unreadable or odd
files under claim names, owns the ledger directory. berth-test-a and root claim regardless,
never wait on her, never traceback; root does not trust her directory.

Needs root (CI runs as root): users are created, code runs as them (tests/userkit.py).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

A, MALLORY = "berth-test-a", "berth-test-b"


def _claim(only: str) -> Any:
    """Claim GPU ``only`` (never waiting), then release it; the GPUs claimed."""
    from berth.api.lease import build_request, claim

    lease, _ = claim(build_request(1, only=only), timeout=0)
    lease.release()
    return lease.indices


def _admin_made(path: str) -> None:
    os.mkdir(path)
    os.chmod(path, 0o1777)  # as /run/berth by systemd-tmpfiles


def _uuids() -> list[str]:
    from berth import config
    from berth.api import read

    return [g.uuid for g in read(config.get(), all=True, process_details=False)]


def test_mallorys_lock_file_neither_breaks_nor_blocks_anybody(shared: Any) -> None:
    claims_dir, run = shared
    _admin_made(claims_dir)
    lock = os.path.join(claims_dir, ".lock")

    def unreadable() -> Any:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        os.fchmod(fd, 0)  # before issue 11: "cannot open the claims lock" for every user
        os.close(fd)

    run.start(MALLORY, unreadable)
    assert run.start(A, lambda: _claim("0"))[1] == [0]

    def symlink() -> Any:
        os.unlink(lock)
        os.symlink("/etc/shadow", lock)  # before: ELOOP traceback, root's too

    run.start(MALLORY, symlink)
    assert run.start(A, lambda: _claim("1"))[1] == [1]
    assert _claim("2") == [2]  # root

    def sits() -> Any:
        import fcntl

        os.unlink(lock)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)  # ...for ever (before: every claim waited 30 s, the
        return fd  # daemon's event loop with it, then failed)

    run.start(MALLORY, sits, hold=True)
    assert run.start(A, lambda: _claim("1"))[1] == [1]
    assert _claim("2") == [2]


def test_mallorys_odd_files_under_claim_names_break_nobody(shared: Any) -> None:
    claims_dir, run = shared
    _admin_made(claims_dir)
    uuids = _uuids()

    def plant() -> Any:
        import fcntl
        import socket

        from berth.claims import files

        def name(i: int, lease: str) -> str:
            return os.path.join(claims_dir, files.claim_name(uuids[i], lease, 1.0, None))

        fd = os.open(name(0, "0000"), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        fcntl.flock(fd, fcntl.LOCK_SH)  # held as a claim is...
        os.fchmod(fd, 0)  # ...but unreadable: before issue 11, a traceback for every user
        os.mkfifo(name(1, "f1f0"))
        socket.socket(socket.AF_UNIX).bind(name(1, "50c7"))
        os.mkdir(name(2, "d1d1"))
        return fd

    run.start(MALLORY, plant, hold=True)

    def look_and_claim() -> Any:
        from berth.claims.ledger import Ledger

        seen = [c.uuid for c in Ledger().scan().claims]
        return seen, _claim("0"), _claim("1"), _claim("2")

    assert run.start(A, look_and_claim)[1] == [[], [0], [1], [2]]
    # root sees it as users do: a file only its owner (or root) could read is not a claim
    assert look_and_claim() == ([], [0], [1], [2])


def test_root_does_not_claim_in_a_directory_mallory_owns(shared: Any) -> None:
    """The owner of a directory may remove or rename any file in it, sticky or not: her
    directory is no place for root's (the daemon's) claims. Users may still share it."""
    from berth.errors import Refused

    _, run = shared
    run.start(MALLORY, lambda: _claim("3"))  # she creates the directory
    assert run.start(A, lambda: _claim("0"))[1] == [0]  # users may share it (see claims.md)
    with pytest.raises(Refused, match=r"belongs to berth-test-b.*install -d -m 1777 /run/berth"):
        _claim("1")
    from berth.claims.ledger import Ledger

    assert Ledger().scan().claims == []  # root still reads it (berth status, berth release)
