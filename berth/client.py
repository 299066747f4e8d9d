"""The client side of the daemon protocol: what every queue command talks through.

Deliberately tiny: imports only ``socket``, ``json`` and ``os`` (through
:mod:`berth.daemon.protocol` and :mod:`berth.daemon.paths`), so ``berth submit`` starts about
as fast as any Python client can.

    with Client() as c:
        job_id = c.call("submit", job={...})["job_id"]
"""

from __future__ import annotations

import os
import socket

from berth.daemon import protocol
from berth.errors import EXIT_REFUSED, EXIT_USAGE, BerthError, DaemonUnreachable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_EXIT = {
    protocol.NO_SUCH_JOB: EXIT_USAGE,
    protocol.NO_SUCH_GPU: EXIT_USAGE,
    protocol.BAD_REQUEST: EXIT_USAGE,
    protocol.NOT_OWNER: EXIT_REFUSED,
    protocol.TOO_MANY_CONNECTIONS: EXIT_REFUSED,
}


class DaemonError(BerthError):
    """The daemon refused a request; ``code`` is one of ``protocol.ERROR_CODES``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.exit_code = _EXIT.get(code, 1)


def unreachable(path: str, why: str) -> DaemonUnreachable:
    return DaemonUnreachable(
        f"no berth daemon answers on {path} ({why}); start one with `berth daemon` "
        "(or set BERTH_SOCKET to the socket of a running one)"
    )


class Client:
    """One connection to the daemon. The handshake is sent with the first request."""

    def __init__(self, path: str | None = None, timeout: float | None = 30.0) -> None:
        from berth.daemon.paths import socket_path

        if path is None:
            configured = None
            if not os.environ.get("BERTH_SOCKET"):  # else the config file cannot matter
                try:
                    from berth.config import get

                    configured = get().socket
                except BerthError:
                    pass
            path = socket_path(configured)
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(path)
        except FileNotFoundError:
            self._sock.close()
            raise unreachable(path, "no socket file") from None
        except OSError as e:
            self._sock.close()
            raise unreachable(path, e.strerror or str(e)) from None
        self._buf = bytearray()
        self._greeted = False
        self.server: dict[str, Any] = {}

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def fileno(self) -> int:
        return self._sock.fileno()

    def settimeout(self, timeout: float | None) -> None:
        self._sock.settimeout(timeout)

    def send(self, kind: str, **fields: Any) -> None:
        """Send one request without reading its response (pipelining; see :meth:`receive`)."""
        data = b""
        if not self._greeted:
            data = protocol.encode(
                {"type": "hello", "version": protocol.PROTOCOL_VERSION, "client": "berth"}
            )
        fields["type"] = kind
        data += protocol.encode(fields)
        try:
            self._sock.sendall(data)
        except OSError as e:
            raise unreachable(self.path, f"connection lost: {e.strerror or e}") from None
        if not self._greeted:
            self._greeted = True
            self.server = self.receive()

    def _read_frame(self) -> bytes:
        header = protocol.HEADER_SIZE
        while True:
            if len(self._buf) >= header:
                n = protocol.frame_length(self._buf)
                if n > protocol.MAX_RESPONSE:
                    raise BerthError(f"daemon sent a frame of {n} bytes; refusing it")
                if len(self._buf) >= header + n:
                    payload = bytes(self._buf[header : header + n])
                    del self._buf[: header + n]
                    return payload
            try:
                chunk = self._sock.recv(1 << 20)
            except TimeoutError:
                raise BerthError(f"the daemon on {self.path} did not answer in time") from None
            except OSError as e:
                raise unreachable(self.path, f"connection lost: {e.strerror or e}") from None
            if not chunk:
                raise unreachable(self.path, "it closed the connection")
            self._buf += chunk

    def receive(self) -> dict[str, Any]:
        """The next response; raises DaemonError if it is an error."""
        msg: dict[str, Any] = protocol.decode(self._read_frame())
        if not msg.get("ok"):
            err = msg.get("error") or {}
            raise DaemonError(str(err.get("code")), str(err.get("message")))
        return msg

    def receive_raw(self) -> bytes:
        """The next response as the daemon sent it (UTF-8 JSON, ``{"ok":true,...}``), not
        decoded, for output that passes it through; raises DaemonError if it is an error."""
        payload = self._read_frame()
        if not payload.startswith(b'{"ok":true'):
            msg = protocol.decode(payload)
            if not msg.get("ok"):
                err = msg.get("error") or {}
                assert isinstance(err, dict)
                raise DaemonError(str(err.get("code")), str(err.get("message")))
        return payload

    def call(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Send one request and return its response."""
        self.send(kind, **fields)
        return self.receive()


def call(kind: str, **fields: Any) -> dict[str, Any]:
    """One request on a fresh connection."""
    with Client() as c:
        return c.call(kind, **fields)


def try_status(timeout: float = 0.5) -> dict[str, Any] | None:
    """The daemon's view for ``berth status`` (jobs per GPU, waiting count), or None when no
    daemon answers quickly. Never raises for an absent daemon."""
    try:
        with Client(timeout=timeout) as c:
            return c.call("status")
    except BerthError:
        return None
