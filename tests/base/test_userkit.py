"""tests/userkit.py, the one kit with which tests act as other Unix users: what runs through it
runs as that user (uid, gid, the user's groups, umask, environment), and a socket made
through it carries that user's credentials. Needs root, as CI runs the suite."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import stat
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from userkit import (
    NOBODY,
    TEAM,
    A,
    AsUser,
    B,
    berth_as,
    call_as,
    connect_as,
    ensure_users,
    listen_as,
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


def _peer_uid(s: socket.socket) -> int:
    _pid, uid, _gid = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return int(uid)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every user may write (as /tmp), beside one only root may enter
    (``private``). (pytest's tmp_path is under a directory only root may enter.)"""
    ensure_users()
    top = Path(tempfile.mkdtemp(prefix="berth-userkit-"))
    try:
        top.chmod(0o755)
        (top / "shared").mkdir(mode=0o1777)
        (top / "shared").chmod(0o1777)
        (top / "private").mkdir(mode=0o700)
        yield top / "shared"
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _who() -> dict[str, Any]:
    import grp

    return {
        "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid()],
        "groups": sorted(grp.getgrgid(g).gr_name for g in os.getgroups()),
        "umask": os.umask(0),
        "env": dict(os.environ),
    }


def test_a_function_runs_as_the_user_with_their_groups_umask_and_environment(
    shared_dir: Path,
) -> None:
    pw = pwd.getpwnam(A)
    who = call_as(A, _who, umask=0o027, env={"X": "1"})
    assert who["ids"] == [pw.pw_uid, pw.pw_uid, pw.pw_gid, pw.pw_gid]
    assert who["groups"] == sorted([A, TEAM])  # from the user database
    assert who["umask"] == 0o027
    assert who["env"] == {"HOME": pw.pw_dir, "USER": A, "LOGNAME": A, "PATH": "/usr/bin:/bin",
                          "X": "1"}  # fmt: skip
    # Without env: the test's own environment, with the user's identity.
    os.environ["BERTH_USERKIT_PROBE"] = "here"
    try:
        env = call_as(B, _who)["env"]
    finally:
        del os.environ["BERTH_USERKIT_PROBE"]
    assert env["BERTH_USERKIT_PROBE"] == "here" and env["USER"] == env["LOGNAME"] == B
    # A uid works as a user; what the function raised comes back, named.
    assert call_as(NOBODY, os.getuid) == NOBODY
    private = shared_dir.parent / "private"
    assert call_as(B, lambda: os.listdir(private)) == {
        "error": "PermissionError",
        "message": f"[Errno 13] Permission denied: '{private}'",
    }


def test_the_cli_runs_as_the_user_and_says_how_it_ended(shared_dir: Path) -> None:
    out = berth_as(B, "--version")
    assert out.returncode == 0 and out.stdout.startswith("berth "), out
    bad = berth_as(B, "no-such-command")
    assert bad.returncode == 2 and "no-such-command" in bad.stderr, bad


def test_a_connection_made_by_a_user_carries_their_credentials(shared_dir: Path) -> None:
    path = str(shared_dir / "root.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o666)
    server.listen(1)
    try:
        client = connect_as(NOBODY, path)
        conn, _ = server.accept()
        with client, conn:
            assert _peer_uid(conn) == NOBODY  # although this process holds the connection
            client.sendall(b"ping")
            assert conn.recv(4) == b"ping"
        os.chmod(path, 0o600)
        with pytest.raises(PermissionError):
            connect_as(NOBODY, path)
    finally:
        server.close()


def test_a_socket_served_by_a_user_is_theirs_until_closed(shared_dir: Path) -> None:
    path = str(shared_dir / "b.sock")
    with listen_as(B, path) as listener:
        st = os.stat(path)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (pwd.getpwnam(B).pw_uid, 0o666)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(path)
        assert _peer_uid(s) == pwd.getpwnam(B).pw_uid
        assert s.recv(1) == b""  # accepted and closed at once
        s.close()
    with pytest.raises(ProcessLookupError):
        os.kill(listener.pid, 0)


def test_a_held_child_stays_until_cleanup(shared_dir: Path) -> None:
    run = AsUser()
    try:
        pid, uid = run.start(A, os.getuid, hold=True)
        assert uid == pwd.getpwnam(A).pw_uid
        assert os.waitpid(pid, os.WNOHANG) == (0, 0)  # alive, holding
        with pytest.raises(AssertionError, match="PermissionError"):
            run.start(B, lambda: os.listdir(shared_dir.parent / "private"))
    finally:
        run.cleanup()
    assert run.children == []
    with pytest.raises(ChildProcessError):  # killed and reaped
        os.waitpid(pid, os.WNOHANG)
