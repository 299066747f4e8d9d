"""HTTP/1.1 on an asyncio stream, kept small and strict: one request per connection.

A request is read whole before anything acts on it, within limits a hostile local user cannot
stretch: the head (request line and headers) at most :data:`MAX_HEAD` bytes and
:data:`MAX_HEADERS` lines, read within :data:`HEAD_TIMEOUT` seconds; a body only with a
``Content-Length`` of at most :data:`MAX_BODY` bytes (no chunked bodies), read within
:data:`BODY_TIMEOUT`. Anything else is refused with the status that says why. Every response
closes the connection (``Connection: close``) and carries headers that keep the page to its
own origin (a content security policy without inline code, no framing, no sniffing).

The standard library's ``http.server`` is thread-per-request and blocking, which the daemon's
single event loop cannot host; this module is the part of it the dashboard needs.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import re
import socket
import struct
import termios
from urllib.parse import parse_qs, unquote

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

MAX_HEAD = 8192  # bytes of request line + headers
MAX_HEADERS = 64
MAX_TARGET = 2048
MAX_BODY = 4096
HEAD_TIMEOUT = 5.0  # seconds to send the whole head (a client sends it at once)
BODY_TIMEOUT = 5.0

_TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_TARGET = re.compile(rb"^/[\x21-\x7e]*$")

REASONS = {
    200: "OK",
    204: "No Content",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    409: "Conflict",
    411: "Length Required",
    413: "Content Too Large",
    421: "Misdirected Request",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
}

SECURITY_HEADERS = (
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    (
        "Content-Security-Policy",
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    ),
)


class HttpError(Exception):
    """A request refused with ``status``; ``message`` goes to the client."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Request:
    __slots__ = ("body", "headers", "method", "path", "query", "target")

    def __init__(
        self, method: str, target: str, headers: dict[str, str], body: bytes = b""
    ) -> None:
        self.method = method
        self.target = target
        path, _, query = target.partition("?")
        self.path = unquote(path)
        try:
            self.query = {k: v[-1] for k, v in parse_qs(query, max_num_fields=20).items()}
        except ValueError:
            raise HttpError(400, "too many query fields") from None
        self.headers = headers
        self.body = body


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request, or None if the client closed before sending one. The reader's limit
    must be :data:`MAX_HEAD` (``asyncio.start_server(limit=MAX_HEAD)``)."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
    except asyncio.IncompleteReadError as e:
        if not e.partial.strip():
            return None
        raise HttpError(400, "incomplete request head") from None
    except asyncio.LimitOverrunError:
        raise HttpError(431, f"request head larger than {MAX_HEAD} bytes") from None
    except asyncio.TimeoutError:
        raise HttpError(408, f"request head not sent within {HEAD_TIMEOUT:g}s") from None
    if len(head) > MAX_HEAD:
        raise HttpError(431, f"request head larger than {MAX_HEAD} bytes")
    method, target, headers = parse_head(head)
    body = b""
    if "transfer-encoding" in headers:
        raise HttpError(501, "chunked request bodies are not accepted; send Content-Length")
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit() or len(length) > 9:
            raise HttpError(400, f"invalid Content-Length {length!r}")
        n = int(length)
        if n > MAX_BODY:
            raise HttpError(413, f"request body of {n} bytes exceeds the maximum of {MAX_BODY}")
        try:
            body = await asyncio.wait_for(reader.readexactly(n), BODY_TIMEOUT)
        except asyncio.IncompleteReadError:
            raise HttpError(400, "request body shorter than its Content-Length") from None
        except asyncio.TimeoutError:
            raise HttpError(408, f"request body not sent within {BODY_TIMEOUT:g}s") from None
    # (no Content-Length: no body, RFC 9112 6.3; `curl -X POST` without data sends so)
    return Request(method, target, headers, body)


def parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    """(method, target, headers with lower-case names) of a request head ending in CRLFCRLF."""
    lines = head[: -4 if head.endswith(b"\r\n\r\n") else None].split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not _TOKEN.match(parts[0]):
        raise HttpError(400, "malformed request line")
    method, target, version = parts
    if version not in (b"HTTP/1.1", b"HTTP/1.0"):
        raise HttpError(400, f"unsupported protocol {version[:16]!r}: speak HTTP/1.1")
    if len(target) > MAX_TARGET or not _TARGET.match(target):
        raise HttpError(400, "request target must be a path of printable ASCII")
    if len(lines) - 1 > MAX_HEADERS:
        raise HttpError(431, f"more than {MAX_HEADERS} header lines")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not _TOKEN.match(name):
            raise HttpError(400, "malformed header line")  # (obs-fold included)
        key = name.decode("ascii").lower()
        text = value.strip(b" \t").decode("latin-1")
        if key in headers:
            if key in ("content-length", "host", "authorization", "origin"):
                raise HttpError(400, f"duplicate {key} header")
            text = headers[key] + ", " + text
        headers[key] = text
    return method.decode("ascii"), target.decode("ascii"), headers


def response(
    status: int,
    body: bytes = b"",
    content_type: str = "application/json",
    headers: Iterable[tuple[str, str]] = (),
    cache: str = "no-store",
    length: bool = True,
) -> bytes:
    """A whole response (head + body); ``length=False`` for a stream (no Content-Length)."""
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
    if status != 204:
        lines.append(f"Content-Type: {content_type}")
    if length and status != 204:
        lines.append(f"Content-Length: {len(body)}")
    lines.append(f"Cache-Control: {cache}")
    lines.append("Connection: close")
    lines.extend(f"{k}: {v}" for k, v in (*SECURITY_HEADERS, *headers))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def json_response(status: int, data: object, headers: Iterable[tuple[str, str]] = ()) -> bytes:
    body = json.dumps(data, separators=(",", ":")).encode()
    return response(status, body, "application/json", headers)


def error_response(status: int, message: str, code: str | None = None) -> bytes:
    extra = [("WWW-Authenticate", 'Bearer realm="berth"')] if status == 401 else []
    return json_response(
        status, {"error": {"status": status, "code": code, "message": message}}, extra
    )


def unsent(writer: asyncio.StreamWriter) -> int:
    """Bytes written to this connection that its reader has not taken yet: what the transport
    still holds and what the kernel has not had acknowledged (``SIOCOUTQ``). On the loopback
    a reader that reads keeps this near 0; one that stopped makes it grow as soon as its
    receive window is full, long before any buffer of ours is."""
    n = writer.transport.get_write_buffer_size()
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            n += struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
        except OSError:
            pass
    return n


def reset(writer: asyncio.StreamWriter) -> None:
    """Drop a connection now, whatever it still holds: a reset, not a close that would wait
    (in the transport or the kernel) for a reader who does not read."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()
