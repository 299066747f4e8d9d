"""Where the dashboard listens: ``--http ADDR`` (parsed by :func:`berth.units.parse_bind`) bound
before the daemon starts.

Loopback only unless asked (``--http-allow-remote``): the dashboard speaks plain HTTP, so a
token sent over a network would travel in clear. The socket is bound by :func:`listen` before
the daemon recovers or serves anything, so a port in use fails the start with a clear message
instead of half-starting a daemon.
"""

from __future__ import annotations

import socket

from berth.errors import BerthError
from berth.units import HTTP_PORT


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
