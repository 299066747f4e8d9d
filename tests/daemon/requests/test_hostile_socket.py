"""A local user who talks to the daemon's socket to hurt it: requests sent and never read,
thousands of idle connections, a connection that never says hello, random frames. The daemon
must keep its memory and descriptors bounded, refuse clearly, change nothing, run nothing, and
keep answering everyone else.
"""

from __future__ import annotations

import json
import os
import random
import select
import socket
import struct
import time
from typing import Any

import psutil
import pytest
from helpers import wait_until
from userkit import NOBODY, call_as

from berth.daemon.requests import server
from berth.wire import protocol


def _frame(obj: object) -> bytes:
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data


def _hello() -> bytes:
    return _frame({"type": "hello", "version": protocol.PROTOCOL_VERSION})


def _rss(daemon: Any) -> int:
    return int(psutil.Process(daemon.proc.pid).memory_info().rss)


def test_requests_never_read_do_not_grow_the_daemon(daemon: Any) -> None:
    daemon.start()
    for _ in range(20):  # so that each answer is not small (~8 kB)
        daemon.submit("true", hold=True, name="x" * 200)
    base = _rss(daemon)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(daemon.socket)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    data = _hello() + _frame({"type": "queue", "all": True}) * 30000
    sent = 0
    while sent < len(data):
        try:
            sent += s.send(data[sent : sent + 65536])
        except BlockingIOError:
            # the daemon stops reading once its answers are not taken
            _, writable, _ = select.select([], [s], [], 2.0)
            if not writable:
                break
    # (1 MB of requests: more than the socket buffers hold, so the daemon must read them)
    assert sent < len(data), "the daemon read every request although no answer was taken"
    assert daemon.call("ping")["ok"]  # everyone else is served meanwhile
    grown = _rss(daemon) - base
    assert grown < 48 * 2**20, f"RSS grew by {grown / 2**20:.0f} MiB"
    s.close()
    assert daemon.call("ping")["ok"]


def test_a_connection_that_never_says_hello_is_closed(
    daemon: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closed once `[daemon] handshake_timeout` has passed (1 s here; 10 s by default), not
    before, and not by our own timeout."""
    config = daemon.fake.root / "config.toml"
    config.write_text('[daemon]\nhandshake_timeout = "1s"\n')
    daemon.env["BERTH_CONFIG"] = str(config)
    daemon.start()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(daemon.socket)
    began = time.monotonic()
    s.sendall(b"\0\0")  # half a header, then nothing
    s.settimeout(server.HANDSHAKE_TIMEOUT + 10)
    assert s.recv(1) == b""  # closed by the daemon, not by our timeout
    took = time.monotonic() - began
    assert 0.9 < took < server.HANDSHAKE_TIMEOUT, took
    s.close()


def _open_to_all(daemon: Any) -> None:
    os.chmod(daemon.sockdir, 0o755)
    os.chmod(daemon.socket, 0o666)  # as a system daemon's socket: every user may connect


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_one_user_cannot_take_every_descriptor(daemon: Any) -> None:
    daemon.start()
    _open_to_all(daemon)
    path = daemon.socket
    limit = server.MAX_CONNECTIONS_PER_USER

    def flood() -> dict[str, Any]:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (limit + 200, limit + 200))
        held = []
        refused: dict[str, Any] = {}
        for _ in range(limit + 50):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(60)  # (a loaded machine may answer the 250th hello late)
            s.connect(path)
            s.sendall(_hello())
            n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
            reply = json.loads(s.recv(n, socket.MSG_WAITALL))
            if reply["ok"]:
                held.append(s)
            else:
                refused = reply["error"]
                s.close()
                break
        return {"held": len(held), "refused": refused}

    out = call_as(NOBODY, flood)
    assert "held" in out, out  # (what the flood raised, if it did)
    assert out["held"] == limit
    assert out["refused"]["code"] == "TOO_MANY_CONNECTIONS"
    assert f"at most {limit} per user" in out["refused"]["message"]
    assert daemon.call("ping")["ok"]  # the flooder's children have exited: all closed
    wait_until(
        lambda: len(psutil.Process(daemon.proc.pid).net_connections(kind="unix")) < 20,
        message="the flooder's connections are gone",
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_random_frames_from_another_user_change_nothing(daemon: Any) -> None:
    daemon.start()
    job = daemon.submit(*daemon.workload("--seconds", "60"), hold=True)
    _open_to_all(daemon)
    marker = os.path.join(daemon.sockdir, "pwned")
    before = daemon.call("queue", all=True)["jobs"]
    path = daemon.socket

    def fuzz() -> dict[str, Any]:
        rng = random.Random(1234)
        kinds = [*protocol.REQUESTS, "nope", "", None, 1]
        values: list[Any] = [
            None, True, False, 0, -1, 2**63, 1.5, float("inf"), "", "x" * 300, [], [True],
            [job], [-1], {}, {"argv": ["touch", marker]}, {"wrap": f"touch {marker}"},
            [str(job)], "0", job,
        ]  # fmt: skip
        fields = sorted({f for spec in protocol.REQUESTS.values() for f in spec} | {"uid"})
        answered = 0
        for i in range(3000):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(path)
            try:
                if i % 7 == 0:
                    s.sendall(struct.pack(">I", rng.randrange(0, 64)) + rng.randbytes(64))
                else:
                    msg: dict[str, Any] = {"type": rng.choice(kinds)}
                    for _ in range(rng.randrange(0, 4)):
                        msg[rng.choice(fields)] = rng.choice(values)
                    s.sendall(_hello() + _frame(msg))
                s.shutdown(socket.SHUT_WR)
                while s.recv(65536):
                    pass
                answered += 1
            except OSError:
                pass
            finally:
                s.close()
        return {"answered": answered}

    out = call_as(NOBODY, fuzz)
    assert out["answered"] > 2500
    assert daemon.call("ping")["ok"]
    after = daemon.call("queue", all=True)["jobs"]
    strip = lambda rows: [{k: v for k, v in r.items() if k != "time"} for r in rows]  # noqa: E731
    assert strip(after) == strip(before)
    assert not os.path.exists(marker)
    with open(daemon.log) as f:
        assert "Traceback" not in f.read()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_requests_held_one_byte_short_are_bounded_per_user_and_time_out(daemon: Any) -> None:
    """Connections that each hold a request one byte short of the frame limit once kept
    ~8 MiB of daemon memory each, for ever (issue 20.11): the bytes one user's unanswered
    requests hold are capped across their connections, and a request that does not arrive
    whole within REQUEST_TIMEOUT is dropped with its connection."""
    daemon.start()
    _open_to_all(daemon)
    path, pid = daemon.socket, daemon.proc.pid
    n = protocol.MAX_REQUEST - 1
    fits = server.MAX_BYTES_PER_USER // n

    def fill(s: socket.socket) -> str | None:
        """Send all of a request but its last byte; the daemon's answer if it gives one."""
        s.sendall(_hello())
        size = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
        hello = json.loads(s.recv(size, socket.MSG_WAITALL))
        if not hello["ok"]:  # (even a handshake is a request in hand)
            return str(hello["error"]["code"])
        s.sendall(struct.pack(">I", n))
        s.setblocking(False)
        sent, block = 0, b"x" * (1 << 20)
        while sent < n - 1:
            readable, writable, _ = select.select([s], [s], [], 5)
            if readable or not writable:
                break  # answered (refused), or no longer read
            sent += s.send(block[: n - 1 - sent])
        s.setblocking(True)
        if not select.select([s], [], [], 0.2)[0]:
            return None  # held: no answer yet (and the clock of REQUEST_TIMEOUT runs)
        size = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
        return str(json.loads(s.recv(size, socket.MSG_WAITALL))["error"]["code"])

    def flood() -> dict[str, Any]:
        base = int(psutil.Process(pid).memory_info().rss)
        held, answers = [], []
        for _ in range(fits + 2):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            answers.append(fill(s))
            held.append(s)
        grown = int(psutil.Process(pid).memory_info().rss) - base
        start = time.monotonic()
        closed = 0
        for s in held:
            s.settimeout(server.REQUEST_TIMEOUT + 10)
            while s.recv(65536):
                pass
            closed += 1
        return {"answers": answers, "grown": grown, "closed_after": time.monotonic() - start}

    out = call_as(NOBODY, flood)
    assert out["answers"][:fits] == [None] * fits  # held...
    assert out["answers"][fits:] == ["TOO_MANY_REQUESTS"] * 2  # ...up to the user's share
    limit = server.MAX_BYTES_PER_USER + 32 * 2**20
    assert out["grown"] < limit, f"RSS grew by {out['grown'] >> 20} MiB"
    assert out["closed_after"] < server.REQUEST_TIMEOUT + 5  # dropped, not kept for ever
    assert daemon.call("ping")["ok"]
