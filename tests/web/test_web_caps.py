"""The dashboard's caps against one hostile local user (issue 41.8): slow connections and
unread event streams of one user must not make the dashboard answer 503 to another, and a
stream whose reader stopped reading is dropped (its slot freed) while its buffer is small."""

from __future__ import annotations

import select
import socket
import threading
from typing import Any

import pytest
from helpers import wait_until

from berth.web import caps

SLOW = 70  # connections sending their head a byte at a time
STREAMS = 40  # event streams never read (half anonymous, half with the attacker's token)


def _host(web: Any) -> bytes:
    return f"Host: 127.0.0.1:{web.port}\r\n".encode()


def _status(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1])


def _open_stream(web: Any, token: str | None, rcvbuf: int | None = None) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:  # (a small window: the reader's stop shows after a few KiB)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(10)
    s.connect((web.host, web.port))
    auth = f"Authorization: Bearer {token}\r\n".encode() if token else b""
    s.sendall(b"GET /api/events HTTP/1.1\r\n" + _host(web) + auth + b"\r\n")
    return s


def _peek_status(s: socket.socket) -> int:
    """The status of the answer, read without taking anything out of the socket."""

    def head() -> bytes:
        try:
            data = s.recv(12, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return b""
        return data if len(data) >= 12 else b""

    return _status(wait_until(head, timeout=10, message="the stream's answer"))


def _hung_up(s: socket.socket) -> bool:
    """The server closed (or reset) this connection; nothing is read to tell."""
    p = select.poll()
    p.register(s, select.POLLRDHUP)
    return any(ev & (select.POLLRDHUP | select.POLLHUP | select.POLLERR) for _, ev in p.poll(0))


def _read_event(s: socket.socket, seen: bytearray) -> None:
    """Read until one more event than ``seen`` holds has arrived."""
    before = seen.count(b"event: ")
    while seen.count(b"event: ") <= before:
        chunk = s.recv(65536)
        assert chunk, "the stream ended"
        seen += chunk


class Trickle:
    """Connections that send their request head one byte at a time, for ever."""

    def __init__(self, web: Any, n: int) -> None:
        self.head = b"GET / HTTP/1.1\r\n" + _host(web) + b"X-Slow: " + b"a" * 4000
        self.socks = [socket.create_connection((web.host, web.port), timeout=10) for _ in range(n)]
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.1) and self.sent < len(self.head):
            byte = self.head[self.sent : self.sent + 1]
            self.sent += 1
            for s in self.socks:
                try:
                    s.send(byte, socket.MSG_DONTWAIT)
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for s in self.socks:
            s.close()


def test_one_users_slow_connections_and_unread_streams_leave_another_user_served(
    web: Any,
) -> None:
    web.start(gpus=1)
    attacker, victim = web.token_for(4242), web.token_for(4343)
    slow = Trickle(web, SLOW)
    unread: list[socket.socket] = []
    try:
        wait_until(  # (slow for well over a new connection's grace)
            lambda: slow.sent * 0.1 >= 2 * caps.GRACE, timeout=10, message="slow heads begun"
        )
        for i in range(STREAMS):
            unread.append(_open_stream(web, attacker if i % 2 else None, rcvbuf=2048))
        statuses = [_peek_status(s) for s in unread]
        # Another user: the page (no token: the browser loads it so), the state, a stream.
        assert web.get("/")[0] == 200
        assert web.get("/api/state", token=victim)[0] == 200
        mine = _open_stream(web, victim)
        try:
            assert _peek_status(mine) == 200
            seen = bytearray()
            _read_event(mine, seen)
            # The attacker got its shares, no more: one per user, one for the anonymous.
            held = [s for s, st in zip(unread, statuses, strict=True) if st == 200]
            assert len(held) == caps.STREAMS_PER_USER + caps.STREAMS_ANONYMOUS, statuses
            assert set(statuses) == {200, 503}
            # They never read: each is dropped (whatever little it holds), the reader is not.
            wait_until(
                lambda: all(_hung_up(s) for s in held), timeout=20, interval=0.1,
                message="every unread stream dropped",
            )  # fmt: skip
            _read_event(mine, seen)
            assert not _hung_up(mine)
        finally:
            mine.close()
        # The attacker's share is free again.
        again = _open_stream(web, attacker)
        try:
            assert _peek_status(again) == 200
        finally:
            again.close()
        # The slow heads do not hold on past the head's deadline.
        wait_until(
            lambda: all(_hung_up(s) for s in slow.socks), timeout=15, interval=0.1,
            message="every slow connection closed",
        )  # fmt: skip
        assert web.daemon.call("ping")["pid"]
    finally:
        slow.close()
        for s in unread:
            s.close()


def test_caps_make_room_from_the_slowest_and_keep_each_share() -> None:
    """The accounting itself (no server): who is closed for room, who is refused, and that
    everything given back is given back once."""
    c = caps.Caps()
    closed: list[int] = []
    slow = [c.admit(lambda i=i: closed.append(i), now=0.0) for i in range(caps.PENDING)]
    # A burst of new connections within the grace closes no one: they wait, to the cap.
    burst = [c.admit(lambda: closed.append(-1), now=0.5, owner=f"uid {100 + i}")
             for i in range(caps.MAX_CONNECTIONS - caps.PENDING)]  # fmt: skip
    assert closed == [] and c.open == caps.MAX_CONNECTIONS
    with pytest.raises(caps.Refused) as refused:  # (past the cap, nobody old enough to close)
        c.admit(lambda: None, now=0.6, owner="uid 99")
    assert refused.value.status == 503 and str(caps.MAX_CONNECTIONS) in refused.value.message
    for s in burst:
        c.read(s, caps.NOBODY if s is burst[0] else 7)
        if s is not burst[0] and c.count(7)[0] >= caps.PER_USER:
            break
    # Past the grace, the oldest pending one makes room (answered 408 by the server).
    late = c.admit(lambda: None, now=caps.GRACE + 0.1, owner="uid 7")
    assert closed == [0]
    with pytest.raises(caps.Refused) as refused:  # (a closed connection counts nowhere)
        c.read(slow[0], 7)
    assert refused.value.status == 408
    # One uid's share is full: its next request is refused (its place given back: it counts
    # in no cap while it says why); another uid is served.
    with pytest.raises(caps.Refused) as refused:
        c.read(late, 7)
    assert refused.value.status == 503 and "uid 7" in refused.value.message
    assert c.count(7)[0] == caps.PER_USER
    other = c.admit(lambda: None, now=caps.GRACE + 0.2)
    assert closed == [0, 1]
    c.read(other, 8)
    c.stream(other)
    assert c.count(8) == (1, 1)
    # Everything given back, twice even, leaves nothing held.
    for s in [*slow, *burst, late, other]:
        c.close(s)
        c.close(s)
    assert (c.open, c.live, c.held, c.streams, c.pending) == (0, 0, {}, {}, {})


def test_stream_shares_per_user_and_for_anonymous_viewers() -> None:
    c = caps.Caps()

    def viewer(who: int) -> caps.Slot:
        s = c.admit(lambda: None, now=0.0)
        c.read(s, who)
        c.stream(s)
        return s

    mine = [viewer(9) for _ in range(caps.STREAMS_PER_USER)]
    anon = [viewer(caps.NOBODY) for _ in range(caps.STREAMS_ANONYMOUS)]
    for who, words in ((9, "uid 9"), (caps.NOBODY, "berth web-token")):
        s = c.admit(lambda: None, now=0.0)
        c.read(s, who)
        with pytest.raises(caps.Refused, match=words):
            c.stream(s)
        c.refused(s)
        c.close(s)
    # Anonymous streams never take every anonymous connection: the page still loads.
    assert caps.STREAMS_ANONYMOUS < caps.ANONYMOUS
    page = c.admit(lambda: None, now=0.0)
    c.read(page, caps.NOBODY)
    viewer(10)
    for s in [*mine, *anon, page]:
        c.close(s)
    assert c.live == 1 and c.count(9) == (0, 0)
