"""Where the dashboard listens: ``--http ADDR`` parsed and bound before the daemon starts.

Loopback only unless asked (``--http-allow-remote``): the dashboard speaks plain HTTP, so a
token sent over a network would travel in clear. The system daemon's default port is below
1024 (:data:`berth.units.SYSTEM_HTTP_PORT`), which only root may bind: while the daemon is down no user can
serve a page at the dashboard's origin (and read what the browser keeps for it).

``--http ADDR`` is parsed by :func:`berth.units.parse_bind` (a port left out:
:func:`berth.units.default_http_port`). The socket is bound first thing at start (:func:`listen`). A port someone else holds does not
keep the queue down: the daemon starts without its dashboard and :class:`Binding` tries the
port again, with a bounded back-off, until it gets it; meanwhile the daemon's log and `berth
status` say why there is no dashboard.
"""

from __future__ import annotations

import logging
import socket
import time

from berth.errors import BerthError
from berth.units import HTTP_PORT

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Coroutine
    from typing import Any

FIRST_RETRY = 1.0  # seconds before the first retry of a port in use; doubled up to
MAX_RETRY = 30.0

log = logging.getLogger("berth.daemon")


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port), or a BerthError saying why not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family, backlog=128, reuse_port=False)
    except OSError as e:
        raise BerthError(
            f"cannot serve the dashboard on {host}:{port}: {e.strerror}; choose another "
            f"address with --http (e.g. --http {host}:{port + 1 if port else HTTP_PORT})"
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
