"""A flood of new connections to the dashboard (issue 41.8's last edge): one local user who
keeps hundreds of connections open and sends nothing on them, replacing each the server
closes at once, must not keep another user from being served. Before a request is read
nobody's token is known, but the kernel says whose socket each connection is
(berth/web/peers.py): the flooder's unread connections fill their own share
(caps.PENDING_PER_OWNER), never the global cap. And a user cannot make their connections
count as someone else's: the owner is the uid that made the socket."""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from typing import Any

from userkit import NOBODY, A, call_as, ensure_users

from berth.web import caps, peers

FLOOD = 200  # connections the flooder keeps open, unread


class Flood:
    """``n`` connections kept open and silent; each the server closes (or answers) is
    replaced at once."""

    def __init__(self, host: str, port: int, n: int) -> None:
        self.addr, self.n = (host, port), n
        self.socks: list[socket.socket] = []
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
        self.socks.append(s)
        self.opened += 1

    def _run(self) -> None:
        while not self.stop.is_set():
            p = select.poll()
            for s in self.socks:
                p.register(s, select.POLLIN | select.POLLRDHUP)
            gone = {fd for fd, ev in p.poll(0) if ev}
            keep = [s for s in self.socks if s.fileno() not in gone]
            for s in self.socks:
                if s.fileno() in gone:
                    s.close()
            self.socks = keep
            while len(self.socks) < self.n:
                self._open()
            time.sleep(0.002)  # (the GIL's turn for the test's own thread)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for s in self.socks:
            s.close()


def _get(host: str, port: int) -> Any:
    def get() -> Any:
        started = time.monotonic()
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(f"GET /api/state HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            head = s.recv(12)
        return [int(head.split(b" ", 2)[1]), time.monotonic() - started]

    return get


def test_a_flood_of_new_unread_connections_leaves_another_user_served(web: Any) -> None:
    ensure_users()
    web.start(gpus=1)
    flood = Flood(web.host, web.port, FLOOD)
    try:
        while flood.opened < 2 * FLOOD:  # (the flood well under way: its first ones replaced)
            time.sleep(0.05)
        for _ in range(5):  # another user asks, again and again, while the flood goes on
            reply = call_as(A, _get(web.host, web.port), preload=("encodings.idna",))
            assert isinstance(reply, list), reply
            status, took = reply
            assert status == 200, f"answered {status} to another user during the flood"
            assert took < 5, took
    finally:
        flood.close()
    assert web.daemon.call("ping")["pid"]


def test_a_connection_counts_as_the_user_who_made_its_socket() -> None:
    """Its owner is the uid that made the peer's socket, found by the connection's own
    four-tuple (both ends, our end by its inode): root's as root, nobody's as nobody's;
    one whose peer is gone is nobody's in particular (``unknown``), never another's."""
    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = srv.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as mine:
            ours, _ = srv.accept()
            assert peers.owner(ours) == f"uid {os.getuid()}"

            ready_r, ready_w = os.pipe()
            go_r, go_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child, as nobody, holds its connection
                try:
                    os.setgid(NOBODY)
                    os.setuid(NOBODY)
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    s.connect((b"127.0.0.1", port))  # (bytes: no codec to import as nobody)
                    os.write(ready_w, b"1")
                    os.read(go_r, 1)
                    s.close()
                finally:
                    os._exit(0)
            os.close(ready_w)
            os.close(go_r)
            assert os.read(ready_r, 1) == b"1", "the child as nobody could not connect"
            theirs, _ = srv.accept()
            assert peers.owner(theirs) == f"uid {NOBODY}"
            os.write(go_w, b"1")
            os.waitpid(pid, 0)
            assert peers.owner(theirs) == peers.UNKNOWN  # (its peer's socket is gone)
            for fd in (ready_r, go_w):
                os.close(fd)
            ours.close()
            theirs.close()
            del mine
    a, b = socket.socketpair()
    with a, b:
        assert peers.owner(a) == f"uid {os.getuid()}"  # (SO_PEERCRED)


def test_each_owner_has_a_share_of_unread_connections() -> None:
    c = caps.Caps()
    closed: list[str] = []
    flood = [c.admit(lambda: closed.append("a"), now=0.0, owner="uid 1") for _ in range(
        caps.PENDING_PER_OWNER)]  # fmt: skip
    try:  # (the flooder's next one, within the grace: refused, its own share is full)
        c.admit(lambda: None, now=0.5, owner="uid 1")
        raise AssertionError("admitted past its share")
    except caps.Refused as e:
        assert e.status == 503 and "uid 1" in e.message
    other = c.admit(lambda: None, now=0.5, owner="uid 2")  # another user: admitted
    c.read(other, caps.NOBODY)
    assert closed == []
    late = c.admit(lambda: None, now=caps.GRACE + 0.1, owner="uid 1")  # past the grace:
    assert closed == ["a"]  # its own oldest made way
    for s in [*flood, other, late]:
        c.close(s)
    assert (c.open, c.pending, c.unread) == (0, {}, {})
