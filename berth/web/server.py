"""The dashboard's HTTP server, on the daemon's event loop (``berth daemon --http``).

It never blocks the loop: requests are read within time and size limits (:mod:`httpio`), the
state is read from the engine in memory, log files are read on a worker thread, and writes
(the samples) go through the engine's journal. Limits against a hostile local user
(:mod:`caps`): at most :data:`caps.MAX_CONNECTIONS` connections at once and
:data:`caps.MAX_STREAMS` live streams, and below those a share for each signed-in user and one
for anonymous viewers, so that one user who fills theirs leaves the others served; a
connection whose request is slow to come is closed to make room. A stream whose reader
stopped reading is dropped (reset) once what it has not taken stays above
:data:`STREAM_UNSENT` bytes for :data:`STREAM_STALL` seconds, or a write of it blocks that
long. Bound to the loopback, it also refuses requests
whose ``Host`` is not a loopback name with its port (a web page elsewhere cannot reach it by
rebinding its DNS name to 127.0.0.1).

Live updates are server-sent events (``/api/events``): ``state`` (the whole picture, at most
every 0.25 s and at most 10% of the loop's time however many viewers; see :meth:`state`) and
``sample`` (one new point of the charts each tick).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time

from berth.devices import telemetry
from berth.web import auth, caps, dcgm, httpio, peers, view
from berth.web.auth import Tokens
from berth.web.history import DAY, History, Sample
from berth.web.observe import RECENT, Observer
from berth.web.routes import Routes
from berth.web.usage import Usage

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.daemon.engine.front import Front
    from berth.daemon.options import Options
    from berth.web.bind import Binding
    from berth.web.caps import Slot

log = logging.getLogger("berth.daemon")

WRITE_TIMEOUT = 10.0  # seconds an answer may take to be taken
STREAM_UNSENT = 4096  # bytes a stream's reader may leave untaken...
STREAM_STALL = 5.0  # ...for this many seconds (or a write block so long) before it is dropped
HEARTBEAT = 15.0  # seconds between keep-alive comments on an idle stream
MIN_INTERVAL = 0.25  # seconds between two builds of the state
MAX_AGE = 2.0  # a state older than this is rebuilt when asked for
BACKLOG = 1024  # connections the kernel queues before we accept them (asyncio's 100 overflowed
# under one user's flood of new connections: a SYN dropped, anyone's connect 1 s late)


class _Stream:
    """One live viewer: the newest state, and the chart points not yet sent."""

    __slots__ = ("samples", "state", "wake")

    def __init__(self) -> None:
        self.state: bytes | None = None
        self.samples: list[bytes] = []
        self.wake = asyncio.Event()


class WebServer:
    def __init__(
        self,
        front: Front,
        host: str,
        port: int,
        *,
        rules: Options,
        token_ttl: float,
        anonymous: bool = True,
        allow_remote: bool = False,
        admin_gid: int | None = None,
        usage_every: float = 60.0,
    ) -> None:
        self.front = front
        self.rules = rules  # the daemon's settings: who may see what (requests/authority.py)
        self.host, self.port = host, port
        self.anonymous = anonymous
        self.allow_remote = allow_remote
        self.admin_gid = admin_gid
        self.tokens = Tokens(rules.state_dir, token_ttl)
        self.loop = asyncio.get_running_loop()
        self.tick = min(5.0, max(0.5, rules.poll_interval))
        self.observer = Observer(front)
        kept = front.view("samples", since=time.time() - 86400, recent=RECENT)
        self.observer.load_recent(kept["recent"][::-1])  # (oldest first)
        self.history = History(self.tick, kept["samples"])
        self.usage = Usage(self.tick, usage_every)
        self.caps = caps.Caps()
        self.diag = peers.Diag()  # (whose socket a new connection is: the kernel's word)
        self.streams: set[_Stream] = set()
        self._srv: asyncio.Server | None = None
        self._timer: asyncio.Handle | None = None
        self._state: bytes | None = None
        self._state_at = -1e9
        self._next_build = 0.0
        self._dirty = True
        self._publish_at: asyncio.TimerHandle | None = None
        self.routes = Routes(self)
        self.binding: Binding | None = None  # how it got its port (for /metrics)
        telemetry.want()  # /metrics gives the DCGM exporter's readings: poll them
        # (the daemon's first read: UUIDs of GPUs lost later)
        dcgm.remember(front.view("gpus")["snapshots"])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def start(self, sock: socket.socket) -> None:
        """Serve on ``sock`` (bound by :func:`berth.web.bind.listen` to our host and port)."""
        self._srv = await asyncio.start_server(
            self._connection, sock=sock, limit=httpio.MAX_HEAD, backlog=BACKLOG
        )
        self.port = sock.getsockname()[1]  # (port 0: the one the kernel gave)
        self.observer.listeners.append(self.notify)
        self.observer.attach()
        self._timer = self.loop.call_soon(self._on_tick)
        log.info("dashboard on %s (%s)", self.url,
                 "anonymous viewers may read" if self.anonymous else "sign-in needed to read")  # fmt: skip

    def close(self) -> None:
        for handle in (self._timer, self._publish_at):
            if handle is not None:
                handle.cancel()
        if self._srv is not None:
            self._srv.close()
        self.diag.close()
        for s in self.streams:
            s.state = None
            s.wake.set()

    # -- connections ---------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.transport.set_write_buffer_limits(0)  # drain(): until the kernel has it all

        def evict() -> None:  # (a newer connection needs the room of this slow one)
            reader.set_exception(httpio.HttpError(408, caps.EVICTED))

        owner = self._owner(writer)
        try:
            slot = self.caps.admit(evict, self.loop.time(), owner)
        except caps.Refused as e:
            try:
                writer.write(httpio.error_response(e.status, e.message))
                await self._linger(owner, reader, writer)
            except OSError:
                pass  # (it is gone already)
            writer.close()
            return
        refused = False
        try:
            try:
                req = await httpio.read_request(reader)
                if req is None:
                    return
                self.caps.read(slot, self.identity(req))
                self.check_host(req)
                reply = await self.routes.dispatch(req, reader, writer, slot)
            except (httpio.HttpError, caps.Refused) as e:
                reply, refused = httpio.error_response(e.status, e.message), True
                self.caps.refused(slot)  # (its place given back: it counts in no cap)
            if reply:
                writer.write(reply)  # (a refusal, counted in no cap: taken at once, or dropped)
                await asyncio.wait_for(writer.drain(), LINGER if refused else WRITE_TIMEOUT)
                if refused and reader.exception() is None:  # (not if closed for room)
                    await self._linger(slot.owner, reader, writer)
        except asyncio.TimeoutError:
            httpio.reset(writer)  # (an answer not taken: dropped, whatever it still holds)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:
            log.exception("web: request failed")
            try:
                writer.write(httpio.error_response(500, "internal error (see the daemon's log)"))
            except (ConnectionError, RuntimeError):
                pass
        finally:
            self.caps.close(slot)
            writer.close()

    async def _linger(
        self, owner: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """A refused connection says why before it closes, if its owner's few such places
        have room (:meth:`caps.Caps.linger`); else it closes at once."""
        if not self.caps.linger(owner):
            return
        try:
            await _linger(reader, writer)
        finally:
            self.caps.lingered(owner)

    def _owner(self, writer: asyncio.StreamWriter) -> str:
        """Whose socket a new connection is, as the kernel says (:mod:`peers`)."""
        sock = writer.get_extra_info("socket")
        return peers.UNKNOWN if sock is None else peers.owner(sock, self.diag)

    def identity(self, req: httpio.Request) -> int:
        """Whose share a request counts against: its valid token's uid, else everyone
        without one's (:data:`caps.NOBODY`)."""
        token = auth.bearer(req.headers)
        uid = None if token is None else self.tokens.check(token)
        return caps.NOBODY if uid is None else uid

    def check_host(self, req: httpio.Request) -> None:
        """Bound to the loopback, a request must name a loopback host and our port."""
        if self.allow_remote:
            return
        host = req.headers.get("host", "")
        name, _, port = host.rpartition(":") if not host.endswith("]") else (host, "", "")
        if name.strip("[]") not in ("127.0.0.1", "localhost", "::1") or port != str(self.port):
            raise httpio.HttpError(421, f"Host {host!r} is not this server: use {self.url}")

    # -- live state ---------------------------------------------------------------------------

    def notify(self) -> None:
        """Something changed: rebuild and push the state soon (coalesced)."""
        self._dirty = True
        if self.streams and self._publish_at is None:
            delay = max(0.0, self._next_build - self.loop.time())
            self._publish_at = self.loop.call_later(delay, self._publish)

    def _publish(self) -> None:
        self._publish_at = None
        if not self.streams:
            return
        data = self.state()
        for s in self.streams:
            s.state = data
            s.wake.set()

    def state(self) -> bytes:
        """The dashboard's state as JSON, rebuilt if something changed and the last build is
        not too recent: builds take at most a tenth of the loop's time, however many ask."""
        now = self.loop.time()
        stale = self._dirty or now - self._state_at > MAX_AGE
        if self._state is None or (stale and now >= self._next_build):
            t0 = time.perf_counter()
            snap = view.snapshot(self.front, auth.anonymous(self.rules), self.observer, self.history)
            snap["tick"] = self.tick
            self._state = json.dumps(snap, separators=(",", ":")).encode()
            self._state_at, self._dirty = now, False
            self._next_build = now + max(MIN_INTERVAL, 10 * (time.perf_counter() - t0))
        return self._state

    def _on_tick(self) -> None:
        self._timer = self.loop.call_later(self.tick, self._on_tick)
        try:
            self._sample()
        except Exception:
            log.exception("web: sampling failed")
        self.notify()

    def _sample(self) -> None:
        gpus = view.gpus(self.front, auth.anonymous(self.rules))
        counts = self.observer.queue_counts()
        util = {g["index"]: float(g["util"]) for g in gpus if g["util"] is not None}
        mem = {
            g["index"]: g["memory_used"] / g["memory_total"]
            for g in gpus
            if g["memory_used"] is not None and g["memory_total"]
        }
        now = time.time()
        s = Sample(
            now, util, mem, counts["RUNNING"] + counts["COMPLETING"], counts["PENDING"],
            view.held_by_user(gpus),
        )  # fmt: skip
        row = self.history.add(s)
        self.usage.add(now, gpus)
        due = self.usage.due(now)
        if row is not None or due:
            # (with `berth report`'s efficiency and outside use gathered since the last)
            usage = self.usage.flush() if due else None
            self.front.view("samples", keep=row, before=now - DAY, usage=usage)
        if self.streams:
            point = self.history.series(now, span=self.tick / 2)["points"]
            data = json.dumps({"gpus": sorted(util), "points": point}, separators=(",", ":"))
            for st in self.streams:
                st.samples = [*st.samples[-50:], data.encode()]
                st.wake.set()

    async def stream(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, slot: Slot
    ) -> None:
        """Serve one live viewer until it goes (or the server closes, or it stops reading)."""
        self.caps.stream(slot)
        try:
            await self._serve_stream(reader, writer)
        finally:
            self.caps.end_stream(slot)

    async def _serve_stream(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        writer.write(httpio.response(200, b"", "text/event-stream; charset=utf-8", length=False))
        me = _Stream()
        me.state = self.state()
        self.streams.add(me)
        gone = asyncio.ensure_future(reader.read(1))  # the viewer closes: EOF
        stalled: float | None = None  # since when its reader leaves too much untaken
        try:
            while not gone.done():
                chunks = [b"event: sample\ndata: " + d + b"\n\n" for d in me.samples]
                if me.state is not None:
                    chunks.append(b"event: state\ndata: " + me.state + b"\n\n")
                me.samples, me.state = [], None
                writer.write(b"".join(chunks) if chunks else b": ping\n\n")
                await asyncio.wait_for(writer.drain(), STREAM_STALL)
                if httpio.unsent(writer) <= STREAM_UNSENT:
                    stalled = None
                elif stalled is None:
                    stalled = self.loop.time()
                elif self.loop.time() - stalled >= STREAM_STALL:
                    log.info("web: a live viewer stopped reading: dropped")
                    httpio.reset(writer)
                    return
                me.wake.clear()
                waker = asyncio.ensure_future(me.wake.wait())
                await asyncio.wait(
                    {waker, gone}, return_when=asyncio.FIRST_COMPLETED,
                    timeout=HEARTBEAT if stalled is None else STREAM_STALL / 4,
                )  # fmt: skip
                waker.cancel()
                if self._srv is None or not self._srv.is_serving():
                    break
        finally:
            self.streams.discard(me)
            gone.cancel()


LINGER = 0.5  # seconds a refused client's unread request is drained before closing


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Half-close after a refusal and drain what the client still sends (briefly, boundedly):
    closing with unread input makes the kernel reset the connection, and the client would
    lose the answer that says why it was refused."""
    try:
        if writer.can_write_eof():
            writer.write_eof()
        loop = asyncio.get_running_loop()
        end = loop.time() + LINGER
        for _ in range(16):
            left = end - loop.time()
            if left <= 0 or not await asyncio.wait_for(reader.read(httpio.MAX_HEAD), left):
                return
    except (ConnectionError, asyncio.TimeoutError, asyncio.LimitOverrunError, ValueError):
        pass
    except httpio.HttpError:
        pass  # (the request was refused while being read: evicted)
