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
- a connection must complete its handshake within :data:`HANDSHAKE_TIMEOUT` seconds; after
  it (``[daemon] handshake_timeout`` sets another), a request must arrive whole within
  :data:`REQUEST_TIMEOUT` seconds of its first byte,
  and a connection with nothing in hand (no request unanswered) that sends nothing for
  :data:`IDLE_TIMEOUT` seconds is closed;
- the requests of one uid in hand at once, across all its connections, hold at most
  :data:`MAX_BYTES_PER_USER` bytes (root has no limit): a frame that would pass it is answered
  with ``TOO_MANY_REQUESTS`` and its connection closed before it is read, so connections that
  each hold a request one byte short of the frame limit cannot pile up memory.

A request goes to its handler by :data:`HANDLERS` (plus what start-up registers): each family's
in its module (jobs, queueview, overview, admin, reserve); ``submit``'s, the one every job comes
in by, here: a job as the client sent it, handed to the engine's admission.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
import struct

from berth.daemon.requests import admin, jobs, overview, queueview, reserve
from berth.daemon.requests.answers import Answers
from berth.daemon.requests.authority import Peer, is_admin
from berth.daemon.requests.frames import Frames
from berth.daemon.requests.reading import read
from berth.daemon.requests.replies import error_reply, guard
from berth.daemon.requests.stream import Stream
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from typing import Any

    from berth.daemon.engine.front import Front
    from berth.daemon.options import Options

    Handler = Callable[
        [Front, "Peer", dict[str, Any]], "dict[str, Any] | Stream | Awaitable[dict[str, Any]]"
    ]

log = logging.getLogger("berth.daemon")
_CRED = struct.Struct("3i")

MAX_PIPELINE = 128  # requests of one connection in hand at once
MAX_CONNECTIONS_PER_USER = 128
MAX_BYTES_PER_USER = 64 * 1024 * 1024  # frames of one uid in hand at once (8 of the largest)
HANDSHAKE_TIMEOUT = 10.0  # seconds
REQUEST_TIMEOUT = 5.0  # seconds for a request to arrive whole, from its first byte
IDLE_TIMEOUT = 600.0  # seconds a connection with nothing in hand may stay silent


def peer_of(sock: socket.socket, admin_gid: int | None, rules: Options | None = None) -> Peer:
    """Who is calling: the socket's credentials at connect time; admin by the user database
    (:func:`berth.daemon.requests.authority.is_admin`), never by the process's /proc."""
    pid, uid, gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return Peer(pid, uid, gid, is_admin(uid, admin_gid), rules)


class _Conn:
    """One connection's bookkeeping: its caller, its requests not yet answered and taken,
    the bytes of their frames it holds (counted in its uid's share)."""

    __slots__ = ("held", "peer", "unanswered")

    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self.unanswered = 0
        self.held = 0


class Server:
    def __init__(
        self, front: Front, admin_gid: int | None = None, rules: Options | None = None
    ) -> None:
        self.front = front
        self.admin_gid = admin_gid
        self.rules = rules  # (the daemon's settings its callers are judged by: authority.py)
        self.connections = 0
        self.per_uid: dict[int, int] = {}
        self.handlers: dict[str, Handler] = dict(HANDLERS)  # (+ what others register)
        self.tasks: set[asyncio.Task[None]] = set()  # one per open connection
        self.answers: set[Answers] = set()  # each open connection's answers to come
        self.bytes_per_uid: dict[int, int] = {}  # frames in hand (not root's)
        self.handshake_timeout = HANDSHAKE_TIMEOUT  # ([daemon] handshake_timeout)
        self.on_large: Callable[[], None] | None = None  # after a burst's answer (answers.py)

    def register(self, kind: str, handler: Handler) -> None:
        """Answer requests of ``kind`` (a type :mod:`berth.wire.protocol` knows) with
        ``handler``: how the dashboard (:mod:`berth.web`) serves ``web_token``."""
        self.handlers[kind] = handler

    def _reserve(self, conn: _Conn, n: int) -> str | None:
        """Count a frame of ``n`` bytes in its uid's share; the refusal if it would not fit."""
        uid = conn.peer.uid
        used = self.bytes_per_uid.get(uid, 0)
        if uid != 0 and used + n > MAX_BYTES_PER_USER:
            return (
                f"uid {uid} already has {used} bytes of requests in hand on this daemon; a "
                f"frame of {n} bytes would pass the most one user may ({MAX_BYTES_PER_USER}): "
                "wait for the answers to your other requests"
            )
        self.bytes_per_uid[uid] = used + n
        conn.held += n
        return None

    def _release(self, conn: _Conn, n: int) -> None:
        if not n:
            return
        conn.held -= n
        uid = conn.peer.uid
        left = self.bytes_per_uid.get(uid, 0) - n
        if left > 0:
            self.bytes_per_uid[uid] = left
        else:
            self.bytes_per_uid.pop(uid, None)

    async def close(self, grace: float) -> None:
        """The daemon stops (before its store closes): the requests in hand (a ``wait`` whose
        job has just ended) get ``grace`` s to be answered, then the rest are cancelled and
        every connection closed, so that no request runs on over a closed store."""
        waiting = [fut for answers in self.answers for fut in answers.waiting()]
        if waiting:
            await asyncio.wait(waiting, timeout=grace)
        for fut in [fut for answers in self.answers for fut in answers.waiting()]:
            fut.cancel()
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        uid: int | None = None
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        try:
            peer = peer_of(writer.get_extra_info("socket"), self.admin_gid, self.rules)
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
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, asyncio.TimeoutError):
            pass
        except asyncio.CancelledError:
            # close(): the connection ends here, not as a cancelled task (Python 3.11's
            # streams then log "Exception in callback ...: CancelledError" with a traceback)
            pass
        except Exception:
            log.exception("connection failed")
        finally:
            if task is not None:
                self.tasks.discard(task)
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
        (pipelined submits commit together), responses written in request order, those ready
        together in one write (:mod:`berth.daemon.requests.answers`)."""
        replies = Answers(self.on_large)
        in_hand = asyncio.Semaphore(MAX_PIPELINE)
        conn = _Conn(peer)

        def written(size: int) -> None:
            conn.unanswered -= 1
            self._release(conn, size)
            in_hand.release()

        self.answers.add(replies)
        out = asyncio.ensure_future(replies.write(writer, written))
        try:
            await self._read(conn, reader, replies, in_hand)
        finally:
            replies.end()
            try:
                await out
            finally:
                self.answers.discard(replies)
                self._release(conn, conn.held)  # (answers never written: the client left)

    async def _read(
        self,
        conn: _Conn,
        reader: asyncio.StreamReader,
        replies: Answers,
        in_hand: asyncio.Semaphore,
    ) -> None:
        peer = conn.peer
        greeted = False
        frames = Frames(reader)

        def answer(response: dict[str, Any] | Stream, size: int = 0) -> None:
            conn.unanswered += 1
            replies.put(response, size)

        while True:
            await in_hand.acquire()  # released once its answer is written and taken
            try:
                deadline = await self._header(conn, frames, greeted)
            except asyncio.IncompleteReadError:
                return
            except (TimeoutError, asyncio.TimeoutError):
                return  # silent too long, or a header that never came whole: close
            n = protocol.frame_length(frames.take(protocol.HEADER_SIZE))
            payload = await self._payload(conn, frames, n, deadline, answer)
            if payload is None:
                return  # (refused, or it did not come whole: the stream is not to be trusted)
            try:
                msg = read(peer.uid, payload)  # (a kept environment not decoded again)
                if not greeted:
                    self._handshake(msg)
                    greeted = True
                    answer(
                        {
                            "ok": True,
                            "version": protocol.PROTOCOL_VERSION,
                            "uid": peer.uid,
                            "admin": peer.admin,
                        },
                        n,
                    )
                    continue
                kind = protocol.check_request(msg)
                if kind == "hello":
                    raise ProtocolError(protocol.BAD_REQUEST, "handshake already done")
                result = self.handlers[kind](self.front, peer, msg)
            except Exception as e:
                answer(error_reply(e), n)
                if not greeted:
                    return  # a failed handshake ends the connection
                continue
            if isinstance(result, asyncio.Future):  # an answer to come (no task for it)
                conn.unanswered += 1
                replies.put(result, n, handler=True)
            elif inspect.isawaitable(result):
                conn.unanswered += 1
                replies.put(asyncio.ensure_future(guard(result)), n)
            elif isinstance(result, Stream):
                answer(result, n)  # (its frames are made as the writer takes them)
            else:
                answer({"ok": True, **result}, n)

    async def _payload(
        self,
        conn: _Conn,
        frames: Frames,
        n: int,
        deadline: float,
        answer: Callable[[dict[str, Any]], None],
    ) -> bytes | None:
        """A frame's ``n`` bytes, counted in its user's share until answered; None (after
        answering why) for a frame too large, one past the user's share, or one that does
        not arrive whole by ``deadline``."""
        if n > protocol.MAX_REQUEST:
            answer(protocol.error(protocol.FRAME_TOO_LARGE,
                                  f"frame of {n} bytes exceeds the maximum of {protocol.MAX_REQUEST}"))  # fmt: skip
            return None
        refusal = self._reserve(conn, n)
        if refusal is not None:
            answer(protocol.error(protocol.TOO_MANY_REQUESTS, refusal))
            return None  # (its frame is not read)
        loop = asyncio.get_running_loop()
        try:
            await frames.fill(n, max(0.0, deadline - loop.time()))
        except (TimeoutError, asyncio.TimeoutError):
            self._release(conn, n)
            answer(protocol.error(
                protocol.BAD_FRAME,
                f"a request of {n} bytes did not arrive whole within {REQUEST_TIMEOUT:g} s: "
                "closing the connection",
            ))  # fmt: skip
            return None
        except BaseException:
            self._release(conn, n)
            raise
        return frames.take(n)

    async def _header(self, conn: _Conn, frames: Frames, greeted: bool) -> float:
        """Until the next frame's header is in hand; by when its payload must have come: the
        handshake within HANDSHAKE_TIMEOUT; then the first byte of a request whenever it
        comes while requests are in hand (a `wait` may last an hour), within IDLE_TIMEOUT
        otherwise, and the rest of the frame within REQUEST_TIMEOUT of its first byte."""
        loop = asyncio.get_running_loop()
        if not greeted:
            deadline = loop.time() + self.handshake_timeout
            await frames.fill(protocol.HEADER_SIZE, self.handshake_timeout)
            return deadline
        if len(frames) >= protocol.HEADER_SIZE:
            return loop.time() + REQUEST_TIMEOUT  # (pipelined: it is here already)
        await frames.fill(1, None if conn.unanswered else IDLE_TIMEOUT)
        deadline = loop.time() + REQUEST_TIMEOUT
        await frames.fill(protocol.HEADER_SIZE, REQUEST_TIMEOUT)
        return deadline

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


# -- jobs coming in: ``submit`` and ``submit_all``, a job as the client sent it, handed to the
# engine's admission (:mod:`berth.daemon.engine.admission.admit`: every check, the queue, the
# answer once durable) --------------------------------------------------------------------------


def submit(
    front: Front, peer: Peer, req: dict[str, Any]
) -> asyncio.Future[dict[str, Any]] | Awaitable[dict[str, Any]]:
    """One job (or one array), answered once it is durable (``dry_run``: what it would be)."""
    return front.admit(peer, req["job"], bool(req.get("dry_run")))


async def submit_all(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
    """A jobs file's jobs, all or none, in one commit; ``env``: of each job naming none."""
    return await front.admit(
        peer, req["jobs"], bool(req.get("dry_run")), each=True, env=req.get("env")
    )


HANDLERS: dict[str, Handler] = {
    "ping": overview.ping,
    "submit": submit,
    "submit_all": submit_all,
    "queue": queueview.queue,
    "show": jobs.show,
    "logs": jobs.logs,
    "attach": jobs.attach,
    "wait": jobs.wait,
    "cancel": jobs.cancel,
    "hold": jobs.hold_jobs,
    "release_job": jobs.release_jobs,
    "update": jobs.update,
    "resubmit": jobs.resubmit,
    "pause": admin.pause,
    "resume": admin.resume,
    "status": overview.status,
    "limits": admin.limits,
    "projects": admin.projects,
    "enforce_log": admin.enforce_log,
    "reserve": reserve.reserve,
    "unreserve": reserve.unreserve,
    "reservations": reserve.reservations,
    "report": overview.report,
    "shutdown": admin.shutdown,
}
