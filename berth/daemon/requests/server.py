"""The socket layer: accept connections, read frames, answer each with one frame. It knows
nothing of what messages mean: it checks framing, the handshake and the request's declared
fields (:func:`protocol.check_request`), then hands the request to the dispatch table.

A malformed frame, an unknown request or a wrong version gets an error reply and changes
nothing; a frame too large to read (or a failed handshake) also closes that connection, since
the stream cannot be trusted after it. The daemon keeps serving everyone else.

No client can make the daemon hold unbounded memory or descriptors:

- at most :data:`MAX_PIPELINE` requests of one connection are in hand at once (read, being
  handled, or answered but not yet taken by the client): a client that sends requests and
  never reads its answers stops being read (its socket buffer fills, its writes block), and
  the daemon holds at most that many answers for it;
- at most :data:`MAX_CONNECTIONS_PER_USER` connections per uid (root has no limit): one more
  is answered with a ``TOO_MANY_CONNECTIONS`` error naming the limit and closed at once, so
  one user's idle connections cannot take the descriptors the daemon needs;
- a connection must complete its handshake within :data:`HANDSHAKE_TIMEOUT` seconds.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
import struct

from berth.daemon.requests.authority import Peer, is_admin
from berth.daemon.requests.handlers import HANDLERS
from berth.errors import BerthError, Refused, UsageError
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable
    from typing import Any

    from berth.daemon.engine.engine import Engine
    from berth.daemon.requests.handlers import Handler

log = logging.getLogger("berth.daemon")
_CRED = struct.Struct("3i")

MAX_PIPELINE = 32  # requests of one connection in hand at once
MAX_CONNECTIONS_PER_USER = 128
HANDSHAKE_TIMEOUT = 10.0  # seconds


def peer_of(sock: socket.socket, admin_gid: int | None) -> Peer:
    """Who is calling: the socket's credentials at connect time; admin by the user database
    (:func:`berth.daemon.requests.authority.is_admin`), never by the process's /proc."""
    pid, uid, gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return Peer(pid, uid, gid, is_admin(uid, admin_gid))


class Server:
    def __init__(self, engine: Engine, admin_gid: int | None = None) -> None:
        self.engine = engine
        self.admin_gid = admin_gid
        self.connections = 0
        self.per_uid: dict[int, int] = {}
        self.handlers: dict[str, Handler] = dict(HANDLERS)  # (+ what others register)

    def register(self, kind: str, handler: Handler) -> None:
        """Answer requests of ``kind`` (a type :mod:`berth.wire.protocol` knows) with
        ``handler``: how the dashboard (:mod:`berth.web`) serves ``web_token``."""
        self.handlers[kind] = handler

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        uid: int | None = None
        try:
            peer = peer_of(writer.get_extra_info("socket"), self.admin_gid)
            open_now = self.per_uid.get(peer.uid, 0)
            if peer.uid != 0 and open_now >= MAX_CONNECTIONS_PER_USER:
                writer.write(
                    protocol.encode(
                        protocol.error(
                            protocol.TOO_MANY_CONNECTIONS,
                            f"uid {peer.uid} already has {open_now} connections open to this "
                            f"daemon (at most {MAX_CONNECTIONS_PER_USER} per user): close some "
                            "(other `berth` commands of yours, `attach`, `logs -f`)",
                        )
                    )
                )
                return
            uid = peer.uid
            self.per_uid[uid] = open_now + 1
            await self._serve(peer, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except Exception:
            log.exception("connection failed")
        finally:
            self.connections -= 1
            if uid is not None:
                left = self.per_uid[uid] - 1
                if left:
                    self.per_uid[uid] = left
                else:
                    del self.per_uid[uid]
            writer.close()

    async def _serve(
        self, peer: Peer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Read frames as they come; answer them in order. Requests are handled concurrently
        (pipelined submits commit together), responses written in request order."""
        replies: asyncio.Queue[asyncio.Future[dict[str, Any]] | None] = asyncio.Queue()
        in_hand = asyncio.Semaphore(MAX_PIPELINE)
        out = asyncio.ensure_future(self._write(replies, writer, in_hand))
        try:
            await self._read(peer, reader, replies, in_hand)
        finally:
            replies.put_nowait(None)
            await out

    async def _write(
        self,
        replies: asyncio.Queue[asyncio.Future[dict[str, Any]] | None],
        writer: asyncio.StreamWriter,
        in_hand: asyncio.Semaphore,
    ) -> None:
        while True:
            item = await replies.get()
            if item is None:
                break
            writer.write(protocol.encode(await item))
            del item
            await writer.drain()  # returns at once unless the client does not read
            in_hand.release()

    async def _read(
        self,
        peer: Peer,
        reader: asyncio.StreamReader,
        replies: asyncio.Queue[asyncio.Future[dict[str, Any]] | None],
        in_hand: asyncio.Semaphore,
    ) -> None:
        loop = asyncio.get_running_loop()
        greeted = False

        def answer(response: dict[str, Any]) -> None:
            fut: asyncio.Future[dict[str, Any]] = loop.create_future()
            fut.set_result(response)
            replies.put_nowait(fut)

        while True:
            await in_hand.acquire()  # released once its answer is written and taken
            try:
                if greeted:
                    header = await reader.readexactly(protocol.HEADER_SIZE)
                else:
                    header = await asyncio.wait_for(
                        reader.readexactly(protocol.HEADER_SIZE), HANDSHAKE_TIMEOUT
                    )
            except asyncio.IncompleteReadError:
                return
            n = protocol.frame_length(header)
            if n > protocol.MAX_REQUEST:
                answer(
                    protocol.error(
                        protocol.FRAME_TOO_LARGE,
                        f"frame of {n} bytes exceeds the maximum of {protocol.MAX_REQUEST}",
                    )
                )
                return  # the stream cannot be trusted after it: close
            if greeted:
                payload = await reader.readexactly(n)
            else:
                payload = await asyncio.wait_for(reader.readexactly(n), HANDSHAKE_TIMEOUT)
            try:
                msg = protocol.decode(payload)
                if not greeted:
                    self._handshake(msg)
                    greeted = True
                    answer(
                        {
                            "ok": True,
                            "version": protocol.PROTOCOL_VERSION,
                            "uid": peer.uid,
                            "admin": peer.admin,
                        }
                    )
                    continue
                kind = protocol.check_request(msg)
                if kind == "hello":
                    raise ProtocolError(protocol.BAD_REQUEST, "handshake already done")
                result = self.handlers[kind](self.engine, peer, msg)
            except Exception as e:
                answer(_error_reply(e))
                if not greeted:
                    return  # a failed handshake ends the connection
                continue
            if inspect.isawaitable(result):
                replies.put_nowait(asyncio.ensure_future(_guard(result)))
            else:
                answer({"ok": True, **result})

    def _handshake(self, msg: dict[str, Any]) -> None:
        if msg.get("type") != "hello":
            raise ProtocolError(
                protocol.BAD_VERSION,
                "the first frame must be the handshake "
                f'{{"type": "hello", "version": {protocol.PROTOCOL_VERSION}}}',
            )
        version = msg.get("version")
        if version != protocol.PROTOCOL_VERSION:
            raise ProtocolError(
                protocol.BAD_VERSION,
                f"protocol version {version!r} is not supported: this daemon speaks version "
                f"{protocol.PROTOCOL_VERSION}; use the berth of the same release",
            )
        protocol.check_request(msg)


async def _guard(result: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    try:
        return {"ok": True, **(await result)}
    except Exception as e:
        return _error_reply(e)


def _error_reply(e: Exception) -> dict[str, Any]:
    if isinstance(e, ProtocolError):
        return protocol.error(e.code, e.message)
    if isinstance(e, Refused):
        return protocol.error(protocol.NOT_OWNER, str(e))
    if isinstance(e, UsageError):
        return protocol.error(protocol.BAD_REQUEST, str(e))
    if isinstance(e, BerthError):
        return protocol.error(protocol.INVALID_STATE, str(e))
    log.exception("request failed", exc_info=e)
    return protocol.error(protocol.INTERNAL, f"internal error: {e!r}")
