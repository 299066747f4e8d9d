"""The terminal of a ``--pty`` job, kept by its supervisor: everything the job writes goes to
its log and to every attached client; what a client types goes to the job, and a client's
window size becomes the terminal's.

Clients connect to a UNIX socket beside the run file (``<run file>.pty``, mode 0600). From
the relay to a client: the job's output, raw. From a client to the relay:

- first, its window size: 4 bytes, rows and cols as two unsigned shorts in native order;
- then the bytes it types, in which ``0xFF`` (``IAC``, as in telnet) starts a command:
  ``IAC IAC`` is one data byte ``0xFF``; ``IAC 'W'`` followed by 4 bytes (rows, cols, as in
  the greeting) is a new window size (``RESIZE``); any other byte after ``IAC`` is a
  protocol error, and the relay drops that client. Commands may be split across reads.

The codec is :mod:`berth.wire.ptyframes`, shared with ``berth attach``.

Data and window sizes cannot be confused, and the common case (keys without ``0xFF``, which
UTF-8 never uses) is sent as it is. Each size a client sends is set on the pty master at once
(``TIOCSWINSZ``); when it changes, the kernel sends SIGWINCH to the job's foreground process
group. With several clients, the last size sent wins (a greeting counts). Detaching is the
client's business: it just closes the connection; the job never notices.

A client that attaches first gets the screen as it is: the last :data:`TAIL` bytes the job
wrote (from the start of a line, when older output was dropped), then live output. So a prompt
the job printed before anyone attached (``Password: ``, a menu, a progress bar) is on the
screen of whoever attaches later, as under ``screen -r``; the bytes are replayed as they came,
escape sequences included, so the terminal redraws what the job drew.

Nothing a client does can stop the supervisor (which also enforces the job's time limit and
records its exit): a client that breaks the protocol is dropped; output a slow client has
not taken yet waits for it, up to :data:`MAX_BEHIND` bytes (a slow terminal over a slow link
catches up), beyond which that client is dropped; input the job does not read is kept up to
:data:`MAX_PENDING` bytes, then discarded. When the job ends, a client still behind is sent
the rest (the job's last lines) while it takes it, before its connection ends: one that takes
nothing for :data:`STALL` seconds is dropped, and the job's end waits :data:`DRAIN` seconds
at most for them all.
"""

from __future__ import annotations

import fcntl
import os
import select
import socket
import struct
import termios
import time

from berth.wire.ptyframes import WINSIZE, decode

MAX_CLIENTS = 32
MAX_PENDING = 64 * 1024  # client input the job has not read yet, at most
MAX_BEHIND = 4 * 1024 * 1024  # job output a client has not taken yet, at most
TAIL = 64 * 1024  # the job's last output, replayed to a client that attaches
STALL = 1.0  # seconds a client behind at the job's end may take nothing before it is dropped
DRAIN = 10.0  # seconds the job's end waits for its clients to take the rest, at most


class _Client:
    __slots__ = ("greeted", "out", "sock", "tail")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.greeted = False
        self.tail = b""  # an unfinished greeting or command
        self.out = bytearray()  # job output it has not taken yet


class PtyRelay:
    def __init__(self, master: int, log_fd: int, path: str) -> None:
        self.master = master
        self.log_fd = log_fd
        self.path = path
        os.set_blocking(master, False)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            self.listener.bind(path)
        finally:
            os.umask(old)
        self.listener.listen(8)
        self.listener.setblocking(False)
        self.clients: dict[int, _Client] = {}
        self.master_open = True  # until every slave is closed (the job is gone)
        self.pending = bytearray()  # input the pty would not take yet
        self.tail = bytearray()  # the job's last output (TAIL bytes, kept up to twice that)
        self.cut = False  # older output was dropped from the tail

    def register(self, poller: select.poll) -> None:
        poller.register(self.master, select.POLLIN)
        poller.register(self.listener.fileno(), select.POLLIN)

    def handle(self, poller: select.poll, fd: int) -> bool:
        """Handle an event on one of our descriptors; False if it is not ours."""
        if fd == self.master:
            self.pump(poller)
            self._flush(poller)
        elif fd == self.listener.fileno():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return True
            if len(self.clients) >= MAX_CLIENTS:
                conn.close()
                return True
            conn.setblocking(False)
            self.clients[conn.fileno()] = _Client(conn)
            poller.register(conn.fileno(), select.POLLIN)
            self._to_client(poller, conn.fileno(), self.screen())
        elif fd in self.clients:
            self._to_client(poller, fd, b"")  # (writable, perhaps)
            if fd in self.clients:
                self._from_client(poller, fd)
        else:
            return False
        return True

    def pump(self, poller: select.poll | None) -> None:
        """Copy what the job wrote to the log and the clients."""
        while self.master_open:
            try:
                data = os.read(self.master, 65536)
            except BlockingIOError:
                return
            except OSError:  # EIO: every slave closed (the job is gone)
                data = b""
            if not data:
                self.master_open = False
                self.pending.clear()
                if poller is not None:
                    poller.unregister(self.master)
                return
            try:
                os.write(self.log_fd, data)
            except OSError:  # a full disk loses log lines, not the job
                pass
            self.tail += data
            if len(self.tail) > 2 * TAIL:
                del self.tail[: len(self.tail) - TAIL]
                self.cut = True
            for cfd in list(self.clients):
                self._to_client(poller, cfd, data)

    def screen(self) -> bytes:
        """What a client that attaches now is shown first: the job's last output."""
        data = bytes(self.tail[-TAIL:])
        if self.cut or len(self.tail) > TAIL:  # begin at a line, not inside an escape sequence
            nl = data.find(b"\n")
            data = data[nl + 1 :] if nl >= 0 else data
        return data

    def _to_client(self, poller: select.poll | None, fd: int, data: bytes) -> None:
        """Send ``data`` after what the client has not taken yet; the rest waits (bounded)."""
        client = self.clients[fd]
        if data:
            client.out += data
        if not client.out:
            return
        try:
            n = client.sock.send(client.out, socket.MSG_NOSIGNAL | socket.MSG_DONTWAIT)
        except BlockingIOError:
            n = 0
        except OSError:  # gone
            self._drop(poller, fd)
            return
        del client.out[:n]
        if len(client.out) > MAX_BEHIND:  # it does not keep up: the job does not wait for it
            self._drop(poller, fd)
        elif poller is not None:
            poller.modify(fd, select.POLLIN | (select.POLLOUT if client.out else 0))

    def _from_client(self, poller: select.poll, fd: int) -> None:
        client = self.clients[fd]
        try:
            data = client.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(poller, fd)
            return
        buf = client.tail + data
        if not client.greeted:
            if len(buf) < WINSIZE.size:
                client.tail = buf
                return
            client.greeted = True
            self._resize(WINSIZE.unpack_from(buf))
            buf = buf[WINSIZE.size :]
        try:
            data, size, client.tail = decode(buf)
        except ValueError:
            self._drop(poller, fd)
            return
        if size is not None:
            self._resize(size)
        if data:
            self._to_job(poller, data)

    def _resize(self, size: tuple[int, int]) -> None:
        rows, cols = size
        try:
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        except OSError:
            pass

    def _to_job(self, poller: select.poll, data: bytes) -> None:
        """Write client input to the job; what the pty will not take now waits (bounded)."""
        if not self.master_open:
            return
        if not self.pending:
            try:
                n = os.write(self.master, data)
            except BlockingIOError:
                n = 0
            except OSError:
                return
            if n == len(data):
                return
            data = data[n:]
            poller.modify(self.master, select.POLLIN | select.POLLOUT)
        self.pending += data[: MAX_PENDING - len(self.pending)]

    def _flush(self, poller: select.poll) -> None:
        if not self.pending or not self.master_open:
            return
        try:
            n = os.write(self.master, self.pending)
        except BlockingIOError:
            return
        except OSError:
            n = len(self.pending)
        del self.pending[:n]
        if not self.pending:
            poller.modify(self.master, select.POLLIN)

    def _drain(self) -> None:
        """Send the clients what they have not taken yet, waiting while they take it (each
        may take nothing for STALL seconds; all of it, DRAIN seconds at most)."""
        now = time.monotonic()
        stalled_at, end = now + STALL, now + DRAIN
        while behind := [fd for fd in list(self.clients) if self._sent(fd)]:
            now = time.monotonic()
            if now >= min(stalled_at, end):
                return  # (each is dropped, its rest unsent)
            poller = select.poll()
            for fd in behind:
                poller.register(fd, select.POLLOUT)
            if poller.poll(max(1, int((min(stalled_at, end) - now) * 1000))):
                stalled_at = time.monotonic() + STALL  # one can take more: wait on

    def _sent(self, fd: int) -> bool:
        """Send a client what it can take now; True if it is still behind (and kept)."""
        self._to_client(None, fd, b"")
        client = self.clients.get(fd)
        return client is not None and bool(client.out)

    def _drop(self, poller: select.poll | None, fd: int) -> None:
        client = self.clients.pop(fd, None)
        if client is not None:
            if poller is not None:
                try:
                    poller.unregister(fd)
                except KeyError:
                    pass
            client.sock.close()

    def close(self) -> None:
        """The job has ended: its last output to the log and to every client, then each
        client's end (EOF). A client still behind is sent the rest while it takes it; one
        that takes nothing for :data:`STALL` seconds is dropped (the job's end is recorded
        after this)."""
        self.pump(None)
        self._drain()
        for fd in list(self.clients):
            self._drop(None, fd)
        self.listener.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
