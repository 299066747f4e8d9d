"""A flood of requests the dashboard refuses (docs/web.md, "Limits"): a refused connection
stays open a moment after its answer (``server.LINGER``: the client reads why it was refused
before the close) and used to count against the global cap of connections meanwhile. One
local user who sends a request the server refuses (a bad one, a foreign ``Host``) on
hundreds of connections, replacing each the server closes, filled the 64 with refused
connections lingering, and another user's request was answered 503 ("more than 64
connections open"). A refused connection's linger is its owner's: a few of each owner at a
time (``caps.LINGER_PER_OWNER``), counted apart from the connections being served; past
them it closes at once."""

from __future__ import annotations

import select
import socket
import threading
import time
from typing import Any

from test_web_flood import _get
from userkit import A, call_as, ensure_users

from berth.web import caps

FLOOD = 200  # connections the flooder keeps open, each sending a request that is refused


class RefusedFlood:
    """``n`` connections, each sending ``request`` at once and then keeping silent; each the
    server closes is replaced at once."""

    def __init__(self, host: str, port: int, n: int, request: bytes) -> None:
        self.addr, self.n, self.request = (host, port), n, request
        self.socks: dict[socket.socket, bool] = {}  # -> its request sent
        self.opened = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _open(self) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(self.addr)
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            return
        self.socks[s] = False
        self.opened += 1

    def _run(self) -> None:
        while not self.stop.is_set():
            p = select.poll()
            for s in self.socks:
                p.register(s, select.POLLIN | select.POLLOUT | select.POLLRDHUP)
            events = dict(p.poll(0))
            for s in list(self.socks):
                ev = events.get(s.fileno(), 0)
                if ev & (select.POLLIN | select.POLLRDHUP | select.POLLHUP | select.POLLERR):
                    del self.socks[s]  # (answered: closed, and replaced)
                    s.close()
                elif ev & select.POLLOUT and not self.socks[s]:
                    try:
                        s.send(self.request)
                        self.socks[s] = True
                    except OSError:
                        del self.socks[s]
                        s.close()
            while len(self.socks) < self.n:
                self._open()
            time.sleep(0.002)  # (the GIL's turn for the test's own thread)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for s in self.socks:
            s.close()


def test_a_flood_of_refused_requests_leaves_another_user_served(web: Any) -> None:
    ensure_users()
    web.start(gpus=1)
    bad = b"GET / HTTP/1.1\r\nHost: attacker.example\r\n\r\n"  # (421: not this server)
    flood = RefusedFlood(web.host, web.port, FLOOD, bad)
    try:
        while flood.opened < 3 * FLOOD:  # (the flood well under way: its first ones replaced)
            time.sleep(0.05)
        for _ in range(8):  # another user asks, again and again, while the flood goes on
            reply = call_as(A, _get(web.host, web.port), preload=("encodings.idna",))
            assert isinstance(reply, list), reply
            status, took = reply
            assert status == 200, f"answered {status} to another user during the flood"
            assert took < 5, took
        assert flood.opened > 3 * FLOOD  # (it went on meanwhile)
    finally:
        flood.close()
    assert web.daemon.call("ping")["pid"]


def test_a_refused_connection_gives_its_place_back_and_lingers_only_in_its_owners_few() -> None:
    c = caps.Caps()
    slots = [c.admit(lambda: None, now=0.0, owner="uid 1") for _ in range(3)]
    c.read(slots[0], 1)
    c.refused(slots[0])  # (refused after its request was read: a 421, a 503 over its share)
    c.refused(slots[1])  # (refused while still pending: a bad request)
    assert c.open == 1 and c.held == {} and len(c.pending) == 1
    assert [c.linger("uid 1") for _ in range(caps.LINGER_PER_OWNER + 1)] == [
        *[True] * caps.LINGER_PER_OWNER, False]  # fmt: skip
    assert c.linger("uid 2")  # another owner has places of their own
    c.lingered("uid 1")
    assert c.linger("uid 1")  # (one place given back)
    owners = [f"uid {100 + i}" for i in range(caps.LINGERING)]
    assert sum(c.linger(o) for o in owners) == caps.LINGERING - caps.LINGER_PER_OWNER - 1
    for s in slots:
        c.close(s)
    assert (c.open, c.pending, c.unread) == (0, {}, {})
