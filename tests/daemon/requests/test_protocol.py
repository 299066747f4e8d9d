"""Acceptance: protocol faults get clear errors; the daemon keeps serving; nothing changes."""

from __future__ import annotations

import json
import socket
import struct

import pytest

from berth.wire import protocol


def _frame(obj: object) -> bytes:
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data


def _read(sock: socket.socket) -> dict:
    buf = b""
    while len(buf) < 4:
        chunk = sock.recv(4 - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    (n,) = struct.unpack(">I", buf)
    data = b""
    while len(data) < n:
        data += sock.recv(n - len(data))
    return json.loads(data)


def _connect(path: str, hello: bool = True) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    if hello:
        s.sendall(_frame({"type": "hello", "version": protocol.PROTOCOL_VERSION}))
        assert _read(s)["ok"] is True
    return s


@pytest.fixture
def served(daemon):
    daemon.start()
    daemon.submit(*daemon.workload("--seconds", "60"), hold=True)
    before = daemon.call("queue", all=True)["jobs"]
    yield daemon
    after = daemon.call("queue", all=True)["jobs"]
    strip = [{k: v for k, v in r.items() if k != "time"} for r in before]
    assert [{k: v for k, v in r.items() if k != "time"} for r in after] == strip  # unchanged
    assert daemon.call("ping")["ok"]  # still serving


def _error(sock: socket.socket, payload: object) -> dict:
    sock.sendall(_frame(payload))
    reply = _read(sock)
    assert reply["ok"] is False
    assert reply["error"]["code"] in protocol.ERROR_CODES
    return reply["error"]


def test_malformed_frames_get_bad_frame_and_the_connection_goes_on(served):
    with _connect(served.socket) as s:
        assert _error(s, b"{not json")["code"] == "BAD_FRAME"
        assert _error(s, b"\xff\xfe")["code"] == "BAD_FRAME"
        assert _error(s, [1, 2])["code"] == "BAD_FRAME"
        deep = _error(s, b"[" * 100_000)  # (issue 20.16: was INTERNAL, with a traceback)
        assert deep["code"] == "BAD_FRAME" and "nested too deeply" in deep["message"]
        s.sendall(_frame({"type": "ping"}))
        assert _read(s)["ok"] is True


def test_oversized_frame_is_refused_and_that_connection_closed(served):
    with _connect(served.socket) as s:
        s.sendall(struct.pack(">I", protocol.MAX_REQUEST + 1) + b"x" * 100)
        err = _read(s)["error"]
        assert err["code"] == "FRAME_TOO_LARGE" and str(protocol.MAX_REQUEST) in err["message"]
        assert s.recv(10) == b""


def test_unknown_request_type_and_bad_fields(served):
    with _connect(served.socket) as s:
        err = _error(s, {"type": "launch_missiles"})
        assert err["code"] == "UNKNOWN_REQUEST" and "launch_missiles" in err["message"]
        assert _error(s, {"no": "type"})["code"] == "BAD_REQUEST"
        err = _error(s, {"type": "show", "job_id": "1"})
        assert err["code"] == "BAD_REQUEST" and "job_id" in err["message"]
        assert _error(s, {"type": "show"})["code"] == "BAD_REQUEST"
        assert _error(s, {"type": "show", "job_id": 1, "extra": 1})["code"] == "BAD_REQUEST"
        err = _error(s, {"type": "submit", "job": {"argv": ["x"], "env": {}}})
        assert err["code"] == "BAD_REQUEST" and "cwd" in err["message"]
        err = _error(
            s, {"type": "submit", "job": {"argv": ["x"], "env": {}, "cwd": "/", "gpus": 1.5}}
        )
        assert err["code"] == "BAD_REQUEST" and "1.5" in err["message"]


def test_wrong_version_and_missing_handshake(served):
    with _connect(served.socket, hello=False) as s:
        err = _error(s, {"type": "hello", "version": 99})
        assert err["code"] == "BAD_VERSION" and "99" in err["message"]
    with _connect(served.socket, hello=False) as s:
        assert _error(s, {"type": "ping"})["code"] == "BAD_VERSION"


def test_cancel_of_a_job_that_does_not_exist(served):
    with _connect(served.socket) as s:
        err = _error(s, {"type": "cancel", "job_ids": [424242]})
        assert err["code"] == "NO_SUCH_JOB" and "424242" in err["message"]
        # One unknown id in a list: nothing is cancelled.
        err = _error(s, {"type": "cancel", "job_ids": [1, 424242]})
        assert err["code"] == "NO_SUCH_JOB"
    out = served.berth("cancel", "424242")
    assert out.returncode == 2 and "no job 424242" in out.stderr


def test_no_daemon_gives_one_line_and_exit_5(daemon):
    out = daemon.berth("queue")
    assert out.returncode == 5
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "berth daemon" in lines[0] and daemon.socket in lines[0]


def test_second_daemon_on_the_same_socket_is_refused(daemon):
    daemon.start()
    out = daemon.berth("daemon", "--foreground")
    assert out.returncode != 0 and "already" in out.stderr


def test_leftover_socket_file_is_replaced(daemon):
    leftover = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    leftover.bind(daemon.socket)  # bound, not listening: nobody answers
    leftover.close()
    daemon.start()
    assert daemon.call("ping")["ok"]


def test_a_full_disk_is_refused_as_such():
    """On a full disk a submit was refused with `internal error: OperationalError`
    (issue 20.16): SQLite's SQLITE_FULL and ENOSPC say that the disk is full."""
    import errno
    import sqlite3

    from berth.daemon.requests.replies import error_reply as _error_reply

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t(x)")
    db.execute("PRAGMA max_page_count=2")
    with pytest.raises(sqlite3.OperationalError) as full:
        for _ in range(10):
            db.execute("INSERT INTO t VALUES (?)", ("x" * 4000,))
    retrying = OSError("the state database cannot commit (database or disk is full); berth retries")
    for e in (full.value, OSError(errno.ENOSPC, "No space left on device"), retrying):
        err = _error_reply(e)["error"]
        assert isinstance(err, dict) and err["code"] == "INVALID_STATE"
        assert "disk is full" in err["message"] and "nothing was queued" in err["message"]
    assert _error_reply(sqlite3.OperationalError("no such table"))["error"]["code"] == "INTERNAL"  # type: ignore[index]
