"""Where the dashboard listens: ``--http ADDR`` parsed and bound before the daemon starts.

Loopback only unless asked (``--http-allow-remote``): the dashboard speaks plain HTTP, so a
token sent over a network would travel in clear. The system daemon's default port is below
1024 (:data:`SYSTEM_PORT`), which only root may bind: while the daemon is down no user can
serve a page at the dashboard's origin (and read what the browser keeps for it).

The socket is bound first thing at start (:func:`listen`). A port someone else holds does not
keep the queue down: the daemon starts without its dashboard and :class:`Binding` tries the
port again, with a bounded back-off, until it gets it; meanwhile the daemon's log and `berth
status` say why there is no dashboard.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import time

from berth.errors import BerthError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Coroutine
    from typing import Any

DEFAULT = "127.0.0.1:8765"
DEFAULT_PORT = 8765
SYSTEM_PORT = 865  # the system daemon's (root's): below 1024, so no user can take it
FIRST_RETRY = 1.0  # seconds before the first retry of a port in use; doubled up to
MAX_RETRY = 30.0

log = logging.getLogger("berth.daemon")


def default_port(system: bool) -> int:
    """Where ``--http`` without a port listens: :data:`SYSTEM_PORT` for the system daemon."""
    return SYSTEM_PORT if system else DEFAULT_PORT


def parse_bind(
    text: str, allow_remote: bool = False, default: int = DEFAULT_PORT
) -> tuple[str, int]:
    """``127.0.0.1:8765``, ``[::1]:8765``, ``localhost:8765``, ``:8765`` or ``8765`` ->
    (host, port); a host alone gets port ``default``. A host that is not a loopback address
    is refused unless ``allow_remote``."""
    raw = text.strip()
    host, port_text = "127.0.0.1", raw
    if raw.startswith("["):
        host, _, rest = raw[1:].partition("]")
        port_text = rest.removeprefix(":") or str(default)
    elif ":" in raw:
        host, _, port_text = raw.rpartition(":")
        host = host or "127.0.0.1"
    elif not raw.isdigit():
        host, port_text = raw, str(default)
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise UsageError(
            f"--http {text!r}: the port must be a number 0..65535 (e.g. --http {DEFAULT})"
        )
    if host == "localhost":
        host = "127.0.0.1"
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        raise UsageError(
            f"--http {text!r}: {host!r} is not an IP address; give one, e.g. --http {DEFAULT}"
        ) from None
    if not addr.is_loopback and not allow_remote:
        raise UsageError(
            f"--http {text!r}: {host} is not a loopback address. The dashboard speaks plain "
            "HTTP (tokens would cross the network in clear): keep it on 127.0.0.1 and reach it "
            f"through `ssh -L {DEFAULT_PORT}:127.0.0.1:{DEFAULT_PORT} HOST`, or, behind a TLS "
            "proxy, allow it with --http-allow-remote ([daemon] http_allow_remote = true)"
        )
    return str(addr), int(port_text)


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port), or a BerthError saying why not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family, backlog=128, reuse_port=False)
    except OSError as e:
        raise BerthError(
            f"cannot serve the dashboard on {host}:{port}: {e.strerror}; choose another "
            f"address with --http (e.g. --http {host}:{port + 1 if port else DEFAULT_PORT})"
        ) from None
    sock.setblocking(False)
    return sock


class Binding:
    """The dashboard's port, bound now or as soon as its holder lets it go.

    ``first`` is what the start's :func:`listen` gave (a socket, or the error saying why
    not); ``serve`` starts the dashboard on a bound socket. Until then :attr:`unavailable`
    says why there is none (for `berth status`), and the port is tried again after 1 s, 2 s,
    4 s... at most every :data:`MAX_RETRY` seconds."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        host: str,
        port: int,
        serve: Callable[[socket.socket], Coroutine[Any, Any, None]],
    ) -> None:
        self.loop, self.host, self.port, self.serve = loop, host, port, serve
        self.unavailable: str | None = None
        self.since = time.time()
        self.waited = 0.0  # seconds the dashboard waited for its port
        self.delay = FIRST_RETRY
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self.closed = False

    async def start(self, first: socket.socket | BerthError) -> None:
        if isinstance(first, socket.socket):
            await self.serve(first)
            return
        self.unavailable = f"dashboard unavailable: {first}"
        log.warning("%s; the queue runs without it, and the port is tried again", first)
        self._timer = self.loop.call_later(self.delay, self._retry)

    def _retry(self) -> None:
        self._timer = None
        if self.closed:
            return
        try:
            sock = listen(self.host, self.port)
        except BerthError:
            self.delay = min(MAX_RETRY, self.delay * 2)
            self._timer = self.loop.call_later(self.delay, self._retry)
            return
        self.waited = time.time() - self.since
        self.unavailable = None
        log.info("the dashboard's port %s:%d is free now (after %.0f s)",
                 self.host, self.port, self.waited)  # fmt: skip
        self._task = self.loop.create_task(self.serve(sock))

    def close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
