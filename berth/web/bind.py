"""Where the dashboard listens: ``--http ADDR`` parsed and bound before the daemon starts.

Loopback only unless asked (``--http-allow-remote``): the dashboard speaks plain HTTP, so a
token sent over a network would travel in clear. The socket is bound by :func:`listen` before
the daemon recovers or serves anything, so a port in use fails the start with a clear message
instead of half-starting a daemon.
"""

from __future__ import annotations

import ipaddress
import socket

from berth.errors import BerthError, UsageError

DEFAULT = "127.0.0.1:8765"
DEFAULT_PORT = 8765


def parse_bind(text: str, allow_remote: bool = False) -> tuple[str, int]:
    """``127.0.0.1:8765``, ``[::1]:8765``, ``localhost:8765``, ``:8765`` or ``8765`` ->
    (host, port). A host that is not a loopback address is refused unless ``allow_remote``."""
    raw = text.strip()
    host, port_text = "127.0.0.1", raw
    if raw.startswith("["):
        host, _, rest = raw[1:].partition("]")
        port_text = rest.removeprefix(":") or str(DEFAULT_PORT)
    elif ":" in raw:
        host, _, port_text = raw.rpartition(":")
        host = host or "127.0.0.1"
    elif not raw.isdigit():
        host, port_text = raw, str(DEFAULT_PORT)
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
