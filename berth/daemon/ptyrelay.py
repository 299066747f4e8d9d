"""The terminal of a ``--pty`` job, kept by its supervisor: everything the job writes goes to
its log and to every attached client; what a client types goes to the job.

Clients connect to a UNIX socket beside the run file (``<run file>.pty``, mode 0600). The
first 4 bytes a client sends are its window size (rows, cols: two unsigned shorts, native
order); after that, raw bytes both ways. Detaching is the client's business: it just closes
the connection; the job never notices.
"""

from __future__ import annotations

import fcntl
import os
import select
import socket
import struct
import termios

_WINSIZE = struct.Struct("HH")


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
        self.clients: dict[int, socket.socket] = {}
        self.greeted: dict[int, bytes] = {}
        self.pgid = 0

    def register(self, poller: select.poll) -> None:
        poller.register(self.master, select.POLLIN)
        poller.register(self.listener.fileno(), select.POLLIN)

    def handle(self, poller: select.poll, fd: int) -> bool:
        """Handle an event on one of our descriptors; False if it is not ours."""
        if fd == self.master:
            self.pump(poller)
        elif fd == self.listener.fileno():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return True
            conn.setblocking(False)
            self.clients[conn.fileno()] = conn
            self.greeted[conn.fileno()] = b""
            poller.register(conn.fileno(), select.POLLIN)
        elif fd in self.clients:
            self._from_client(poller, fd)
        else:
            return False
        return True

    def pump(self, poller: select.poll | None) -> None:
        """Copy what the job wrote to the log and the clients."""
        while True:
            try:
                data = os.read(self.master, 65536)
            except BlockingIOError:
                return
            except OSError:  # EIO: every slave closed (the job is gone)
                data = b""
            if not data:
                if poller is not None:
                    poller.unregister(self.master)
                return
            os.write(self.log_fd, data)
            for cfd, conn in list(self.clients.items()):
                try:
                    conn.sendall(data)
                except OSError:
                    self._drop(poller, cfd)

    def _from_client(self, poller: select.poll, fd: int) -> None:
        conn = self.clients[fd]
        try:
            data = conn.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(poller, fd)
            return
        if fd in self.greeted:
            data = self.greeted.pop(fd) + data
            if len(data) < _WINSIZE.size:
                self.greeted[fd] = data
                return
            rows, cols = _WINSIZE.unpack_from(data)
            data = data[_WINSIZE.size :]
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        if data:
            try:
                os.write(self.master, data)
            except OSError:
                pass

    def _drop(self, poller: select.poll | None, fd: int) -> None:
        conn = self.clients.pop(fd, None)
        self.greeted.pop(fd, None)
        if conn is not None:
            if poller is not None:
                try:
                    poller.unregister(fd)
                except KeyError:
                    pass
            conn.close()

    def close(self) -> None:
        self.pump(None)
        for fd in list(self.clients):
            self._drop(None, fd)
        self.listener.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
