"""The socket layer: accept connections, read frames, answer each with one frame. It knows
nothing of what messages mean: it checks framing, the handshake and the request's declared
fields (:func:`protocol.check_request`), then hands the request to the dispatch table.

A malformed frame, an unknown request or a wrong version gets an error reply and changes
nothing; a frame too large to read (or a failed handshake) also closes that connection, since
the stream cannot be trusted after it. The daemon keeps serving everyone else.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
import struct

from berth.daemon import protocol
from berth.daemon.handlers import HANDLERS, Peer
from berth.daemon.protocol import ProtocolError
from berth.errors import BerthError, Refused, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine import Engine

log = logging.getLogger("berth.daemon")
_CRED = struct.Struct("3i")


def peer_of(sock: socket.socket, admin_gid: int | None) -> Peer:
    pid, uid, gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    admin = uid == 0
    if not admin and admin_gid is not None:
        admin = gid == admin_gid or _in_group(pid, admin_gid)
    return Peer(pid, uid, gid, admin)


def _in_group(pid: int, gid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Groups:"):
                    return str(gid) in line.split()[1:]
    except OSError:
        pass
    return False


class Server:
    def __init__(self, engine: Engine, admin_gid: int | None = None) -> None:
        self.engine = engine
        self.admin_gid = admin_gid
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            peer = peer_of(writer.get_extra_info("socket"), self.admin_gid)
            await self._serve(peer, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:
            log.exception("connection failed")
        finally:
            self.connections -= 1
            writer.close()

    async def _serve(
        self, peer: Peer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        greeted = False
        while True:
            try:
                header = await reader.readexactly(protocol.HEADER.size)
            except asyncio.IncompleteReadError:
                return
            (n,) = protocol.HEADER.unpack(header)
            if n > protocol.MAX_REQUEST:
                writer.write(
                    protocol.encode(
                        protocol.error(
                            protocol.FRAME_TOO_LARGE,
                            f"frame of {n} bytes exceeds the maximum of {protocol.MAX_REQUEST}",
                        )
                    )
                )
                await writer.drain()
                return
            payload = await reader.readexactly(n)
            close = False
            try:
                msg = protocol.decode(payload)
                if not greeted:
                    close = True  # a failed handshake ends the connection
                    self._handshake(msg)
                    greeted, close = True, False
                    response: dict[str, Any] = {
                        "ok": True,
                        "version": protocol.PROTOCOL_VERSION,
                        "uid": peer.uid,
                        "admin": peer.admin,
                    }
                else:
                    kind = protocol.check_request(msg)
                    if kind == "hello":
                        raise ProtocolError(protocol.BAD_REQUEST, "handshake already done")
                    result = HANDLERS[kind](self.engine, peer, msg)
                    if inspect.isawaitable(result):
                        result = await result
                    response = {"ok": True, **result}
            except ProtocolError as e:
                response = protocol.error(e.code, e.message)
            except Refused as e:
                response = protocol.error(protocol.NOT_OWNER, str(e))
            except UsageError as e:
                response = protocol.error(protocol.BAD_REQUEST, str(e))
            except BerthError as e:
                response = protocol.error(protocol.INVALID_STATE, str(e))
            except Exception as e:
                log.exception("request failed")
                response = protocol.error(protocol.INTERNAL, f"internal error: {e!r}")
            writer.write(protocol.encode(response))
            if writer.transport.get_write_buffer_size() > 1 << 16:
                await writer.drain()
            if close:
                await writer.drain()
                return

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
