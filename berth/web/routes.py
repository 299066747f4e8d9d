"""What each URL of the dashboard answers, and who may ask.

Reads (``GET``): the page and its files; ``/api/state`` (the whole picture),
``/api/history`` (the charts), ``/api/events`` (live updates), ``/metrics``,
``/api/usage`` (the Usage tab: `berth report`'s rows the viewer may see); open to
anonymous viewers unless the daemon says otherwise (``[daemon] http_anonymous = false``),
then they need a token like the rest. ``/api/whoami`` says whose a token is.
``/api/jobs/ID`` (the job as `berth show` gives it) and ``/api/jobs/ID/log`` (the tail of
its output) need the token of the job's owner (or an admin): a log may hold secrets.

Actions (``POST /api/jobs/ID/cancel|hold|release``) need a token, always, and act as its
user through the socket's own handlers, so ownership is checked in one place. The token
travels in the ``Authorization`` header, which no other site's page can make a browser send
(no cookie, nothing a form can forge); a request whose ``Origin`` is another site is refused
besides.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import stat
import time
from importlib.resources import files
from urllib.parse import urlsplit

from berth.daemon.requests.server import HANDLERS
from berth.errors import BerthError
from berth.web import auth, httpio, logaccess, metrics, view
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable
    from typing import Any, Protocol

    from berth.daemon.engine.front import Front
    from berth.daemon.options import Options
    from berth.daemon.requests.authority import Peer
    from berth.web.auth import Tokens
    from berth.web.bind import Binding
    from berth.web.caps import Slot
    from berth.web.history import History
    from berth.web.observe import Observer

    class WebServer(Protocol):
        """What the routes read and call of :class:`berth.web.server.WebServer` (named so,
        this module would import the one that imports it)."""

        front: Front
        rules: Options
        anonymous: bool
        admin_gid: int | None
        tokens: Tokens
        loop: asyncio.AbstractEventLoop
        observer: Observer
        history: History
        binding: Binding | None

        def state(self) -> bytes: ...

        async def stream(
            self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, slot: Slot
        ) -> None: ...

STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/render.js": ("render.js", "text/javascript; charset=utf-8"),
    "/usage.js": ("usage.js", "text/javascript; charset=utf-8"),
    "/app.css": ("app.css", "text/css; charset=utf-8"),
    "/favicon.svg": ("favicon.svg", "image/svg+xml"),
}
ACTIONS = {"cancel": "cancel", "hold": "hold", "release": "release_job"}  # page -> request
LOG_TAIL = 16384  # bytes of a log sent when no offset is given
LOG_CHUNK = 65536  # at most this many bytes per answer
CACHE_SECONDS = 1.0  # /metrics and /api/history are made at most once a second, however asked
USAGE_SECONDS = 30.0  # /api/usage (30 days of records) at most every 30 s per viewer

_JOB = re.compile(r"^/api/jobs/([0-9]{1,12})(?:/(log|cancel|hold|release))?$")

# ProtocolError codes -> HTTP status
STATUS = {
    "NO_SUCH_JOB": 404,
    "NOT_OWNER": 403,
    "INVALID_STATE": 409,
    "BAD_REQUEST": 400,
    "NO_SUCH_GPU": 404,
}


def _static(name: str) -> bytes:
    return files("berth.web").joinpath("static", name).read_bytes()


class Routes:
    def __init__(self, server: WebServer) -> None:
        self.server = server
        self.files = {path: (_static(name), ctype) for path, (name, ctype) in STATIC.items()}
        self._cache: dict[str, tuple[float, bytes]] = {}
        self._making: dict[str, asyncio.Future[bytes]] = {}

    def cached(self, key: str, make: Callable[[], bytes]) -> bytes:
        """``make()``, or its answer of less than :data:`CACHE_SECONDS` ago: a client asking
        in a loop costs the daemon's loop nothing more."""
        now = self.server.loop.time()
        hit = self._cache.get(key)
        if hit is not None and now - hit[0] < CACHE_SECONDS:
            return hit[1]
        out = make()
        self._cache[key] = (now, out)
        return out

    # -- who asks -----------------------------------------------------------------------------

    def viewer(self, req: httpio.Request) -> Peer | None:
        """The token's user, None without one; a token that is not valid is refused (the page
        must know to sign in again, not silently see less)."""
        token = auth.bearer(req.headers)
        if token is None:
            return None
        uid = self.server.tokens.check(token)
        if uid is None:
            raise httpio.HttpError(
                401,
                "this token is not valid here (or has expired, or was revoked): get a new "
                "one with `berth web-token`",
            )
        return auth.peer_for(uid, self.server.admin_gid, self.server.rules)

    def reader(self, req: httpio.Request) -> Peer:
        peer = self.viewer(req)
        if peer is not None:
            return peer
        if not self.server.anonymous:
            raise httpio.HttpError(401, "sign in: this dashboard is not open to anonymous viewers")
        return auth.anonymous(self.server.rules)

    def signed_in(self, req: httpio.Request) -> Peer:
        peer = self.viewer(req)
        if peer is None:
            raise httpio.HttpError(401, "sign in first: `berth web-token` prints your token")
        return peer

    # -- dispatch -----------------------------------------------------------------------------

    async def dispatch(
        self,
        req: httpio.Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        slot: Slot,
    ) -> bytes | None:
        path = req.path
        if req.method == "POST":
            return await self.action(req)
        if req.method != "GET":
            raise httpio.HttpError(405, f"method {req.method} not allowed")
        if path in self.files:
            body, ctype = self.files[path]
            return httpio.response(200, body, ctype, cache="no-cache")
        if path == "/favicon.ico":
            return httpio.response(204)
        if path == "/metrics":
            self.reader(req)
            return self.cached("metrics", self.metrics)
        if path == "/api/state":
            self.reader(req)
            return httpio.response(200, self.server.state())
        if path == "/api/history":
            self.reader(req)
            span = self.span(req)
            return self.cached(f"history {span}", lambda: self.history(span))
        if path == "/api/usage":
            return await self.usage(self.reader(req))
        if path == "/api/events":
            self.reader(req)
            await self.server.stream(reader, writer, slot)
            return None
        if path == "/api/whoami":
            peer = self.signed_in(req)
            return httpio.json_response(
                200, {"user": peer.user, "uid": peer.uid, "admin": peer.admin}
            )
        m = _JOB.match(path)
        if m is not None and m.group(2) in (None, "log"):
            peer = self.signed_in(req)
            job = self._owned_job(int(m.group(1)), peer)
            if m.group(2) is None:
                return httpio.json_response(200, {"job": job})
            return await self.log(req, job, peer)
        raise httpio.HttpError(404, f"no page {path!r} here")

    # -- reads --------------------------------------------------------------------------------

    def metrics(self) -> bytes:
        front = self.server.front
        status, seen = front.view("status"), front.view("gpus")
        gpus = view.gpus(front, auth.anonymous(self.server.rules), status, seen)
        binding = self.server.binding
        text = metrics.render(
            gpus, self.server.observer, self.server.history, view.held_by_user(gpus),
            status["enforce"],
            port_waited=binding.waited if binding is not None else 0.0,
            snapshots=seen["snapshots"], projects=view.projects(front),
            disk_full=seen["disk_full"], starts_exhausted=seen["starts_exhausted"],
        )  # fmt: skip
        return httpio.response(200, text.encode(), metrics.CONTENT_TYPE)

    SPANS = (3600.0, 6 * 3600.0, 86400.0)

    def span(self, req: httpio.Request) -> float:
        """``?span=SECONDS``, rounded up to an hour, 6 hours or a day (the default)."""
        text = req.query.get("span", "86400")
        try:
            asked = float(text)
        except ValueError:
            raise httpio.HttpError(400, f"span={text!r}: give seconds, e.g. 3600") from None
        return next((s for s in self.SPANS if asked <= s), self.SPANS[-1])

    def history(self, span: float) -> bytes:
        return httpio.json_response(200, self.server.history.series(time.time(), span))

    async def usage(self, peer: Peer) -> bytes:
        """The Usage tab's figures, made at most every :data:`USAGE_SECONDS` per viewer (and
        once for all anonymous ones)."""
        key = f"usage {peer.uid} {peer.admin}"
        now = self.server.loop.time()
        hit = self._cache.get(key)
        if hit is not None and now - hit[0] < USAGE_SECONDS:
            return hit[1]
        making = self._making.get(key)
        if making is None:  # (viewers asking at once share one making)
            making = self._making[key] = asyncio.ensure_future(self._usage(key, peer))
        return await asyncio.shield(making)

    async def _usage(self, key: str, peer: Peer) -> bytes:
        try:
            body = await view.usage(self.server.front, peer, time.time())
            out = httpio.json_response(200, body)
            self._cache[key] = (self.server.loop.time(), out)
            return out
        finally:
            self._making.pop(key, None)

    def _owned_job(self, job_id: int, peer: Peer) -> dict[str, Any]:
        job = self._call(peer, "show", job_id=job_id)["job"]
        if job["uid"] != peer.uid and not peer.admin:
            raise httpio.HttpError(
                403,
                f"job {job_id} belongs to {job['user']}, not {peer.user}: only they or an admin may read it",
            )
        return dict(job)

    async def log(self, req: httpio.Request, job: dict[str, Any], peer: Peer) -> bytes:
        which = req.query.get("stream", "out")
        if which not in ("out", "err"):
            raise httpio.HttpError(400, f"stream={which!r}: use out or err")
        path = job["stdout"] if which == "out" else job["stderr"]
        offset_text = req.query.get("offset")
        if offset_text is not None and not offset_text.isdigit():
            raise httpio.HttpError(400, f"offset={offset_text!r}: give a byte offset")
        offset = None if offset_text is None else int(offset_text)
        if not path:
            return httpio.json_response(200, {"path": None, "size": 0, "offset": 0, "text": ""})
        loop = self.server.loop
        viewer = (peer, f"sudo berth logs {job['id']}")
        out = await loop.run_in_executor(None, read_log, path, int(job["uid"]), offset, viewer)
        out["state"] = job["state"]
        return httpio.json_response(200, out)

    # -- actions ------------------------------------------------------------------------------

    async def action(self, req: httpio.Request) -> bytes:
        origin = req.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != req.headers.get("host"):
            raise httpio.HttpError(403, f"a request from {origin!r} may not act here")
        peer = self.signed_in(req)
        m = _JOB.match(req.path)
        if m is None or m.group(2) not in ACTIONS:
            raise httpio.HttpError(
                404, f"no action {req.path!r}: POST /api/jobs/ID/cancel|hold|release"
            )
        kind, job_id = ACTIONS[m.group(2)], int(m.group(1))
        result = await self._act(peer, kind, job_id)
        return httpio.json_response(
            200, {"ok": True, "action": kind, "job_id": job_id, "result": result}
        )

    async def _act(self, peer: Peer, kind: str, job_id: int) -> dict[str, Any]:
        req: dict[str, Any] = {"type": kind, "job_ids": [job_id]}
        protocol.check_request(req)
        try:
            result = HANDLERS[kind](self.server.front, peer, req)
            if inspect.isawaitable(result):
                result = await result
            assert isinstance(result, dict)  # (cancel, hold, release: one answer)
        except ProtocolError as e:
            raise httpio.HttpError(STATUS.get(e.code, 400), e.message) from None
        except (BerthError, OSError) as e:
            raise httpio.HttpError(409, str(e)) from None
        return dict(result)

    def _call(self, peer: Peer, kind: str, **fields: Any) -> dict[str, Any]:
        req: dict[str, Any] = {"type": kind, **fields}
        protocol.check_request(req)
        try:
            out = HANDLERS[kind](self.server.front, peer, req)
        except ProtocolError as e:
            raise httpio.HttpError(STATUS.get(e.code, 400), e.message) from None
        assert isinstance(out, dict)
        return out


def read_log(
    path: str, uid: int, offset: int | None, viewer: tuple[Peer, str] | None = None
) -> dict[str, Any]:
    """Read a job's log as the daemon, but only a regular file its owner owns (a job's log is
    written by the job as its user; a path that names someone else's file, or a link to one,
    is refused: the daemon may be root), and for a ``viewer`` (who asks, the command that would
    read it for them) other than its owner or root only one they could read themselves
    (:mod:`berth.web.logaccess`). Without ``offset``: the last :data:`LOG_TAIL` bytes from a
    line start; with one: what follows it (at most :data:`LOG_CHUNK` bytes)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return {"path": path, "size": 0, "offset": 0, "text": "", "missing": True}
    except OSError as e:
        raise httpio.HttpError(403, f"cannot read {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != uid:
            raise httpio.HttpError(403, f"{path} is not a log file of the job's owner")
        if viewer is not None:  # (the daemon is root; an admin of the group is not)
            who, command = viewer
            why = logaccess.denied(path, st, who, uid)
            if why is not None:
                raise httpio.HttpError(
                    403, f"{why}: reading it needs root itself, not only the admin group ({command})"
                )
        size = st.st_size
        if offset is None or offset > size:
            start = max(0, size - LOG_TAIL)
        else:
            start = offset
        data = os.pread(fd, min(LOG_CHUNK, size - start), start)
        if offset is None and start > 0 and b"\n" in data:
            cut = data.index(b"\n") + 1
            data, start = data[cut:], start + cut
    finally:
        os.close(fd)
    return {
        "path": path,
        "size": size,
        "offset": start + len(data),
        "start": start,
        "text": data.decode("utf-8", "replace"),
        "reset": offset is not None and offset > size,
    }
