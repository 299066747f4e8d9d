"""Who a web request acts as: per-user tokens, made by the daemon and checked in constant time.

A token is ``berth2.<uid>.<issued>.<mac>``: ``issued`` the time it was made (Unix
milliseconds), ``mac`` an HMAC-SHA256 over both with the daemon's web secret (32 random bytes
in ``<state dir>/web.secret``, mode 0600, made on first use), cut to 128 bits. Only the daemon
can make one, and it makes one only for the caller of the ``web_token`` request on its UNIX
socket, whose uid the kernel vouches for (SO_PEERCRED): ``berth web-token`` prints the
caller's own token. A request carrying a valid token (the ``Authorization: Bearer`` header;
never a cookie, which every port of localhost would be sent) acts as that uid, through the
same handlers and ownership checks as the socket.

A token expires ``[daemon] web_token_ttl`` after it was made (12 hours by default). ``berth
web-token --revoke`` revokes every token of its caller made until then: the time is kept per
uid in ``<state dir>/web.revoked`` (0600, one entry per user who ever revoked), which the
daemon reads again whenever it changes. Removing ``web.secret`` and restarting the daemon
revokes every token of every user.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import os
import pwd
import stat
import time

from berth.daemon.requests.authority import Peer
from berth.errors import BerthError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from berth.daemon.engine.front import Front
    from berth.daemon.options import Options
    from berth.daemon.requests.server import Handler

SECRET_FILE = "web.secret"
REVOKED_FILE = "web.revoked"
PREFIX = "berth2"
DEFAULT_TTL = 12 * 3600.0  # seconds a token is good for ([daemon] web_token_ttl)
SKEW_MS = 60_000  # a token "made" up to this far in the future is accepted (clock steps)


def load_secret(state_dir: str) -> bytes:
    """The daemon's web secret, made (0600) if missing. Refuses a file that is not a regular
    file of ours with no access for others (someone may have planted or read it)."""
    path = os.path.join(state_dir, SECRET_FILE)
    try:
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
    except FileExistsError:
        pass
    else:
        try:
            os.write(fd, os.urandom(32))
            os.fsync(fd)
        finally:
            os.close(fd)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise BerthError(f"cannot read the web secret {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise BerthError(
                f"the web secret {path} must be a regular file of uid {os.geteuid()} with mode "
                "0600: remove it (every web token changes) and restart the daemon"
            )
        secret = os.read(fd, 64)
    finally:
        os.close(fd)
    if len(secret) < 32:
        raise BerthError(f"the web secret {path} is damaged: remove it and restart the daemon")
    return secret


def _mac(secret: bytes, uid: int, issued: int) -> str:
    return hmac.new(secret, f"berth-web2:{uid}:{issued}".encode(), hashlib.sha256).hexdigest()[:32]


def make_token(secret: bytes, uid: int, issued: int | None = None) -> str:
    """A token for ``uid`` made at ``issued`` (Unix milliseconds; now by default)."""
    when = time.time_ns() // 1_000_000 if issued is None else issued
    return f"{PREFIX}.{uid}.{when}.{_mac(secret, uid, when)}"


def check_token(
    secret: bytes,
    token: str,
    ttl: float = DEFAULT_TTL,
    revoked: dict[int, int] | None = None,
    now: float | None = None,
) -> int | None:
    """The uid a token stands for, or None if it is not one this daemon made, or it has
    expired (``ttl`` seconds after it was made), or its user revoked it (``revoked``: uid ->
    the time, Unix ms, until which their tokens are revoked)."""
    parts = token.split(".")
    if len(parts) != 4 or parts[0] != PREFIX:
        return None
    if not (
        parts[1].isascii() and parts[1].isdigit() and len(parts[1]) <= 10
        and parts[2].isascii() and parts[2].isdigit() and len(parts[2]) <= 16
    ):
        return None
    uid, issued = int(parts[1]), int(parts[2])
    expected = f"{PREFIX}.{uid}.{issued}.{_mac(secret, uid, issued)}"
    if not hmac.compare_digest(expected.encode(), token.encode(errors="replace")):
        return None
    now_ms = (time.time() if now is None else now) * 1000
    if not now_ms - ttl * 1000 < issued <= now_ms + SKEW_MS:
        return None  # expired (or made in the future)
    if revoked is not None and issued <= revoked.get(uid, -1):
        return None
    return uid


class Tokens:
    """The daemon's tokens: made and checked with its secret, its ``ttl`` (seconds) and the
    revocations in its state directory."""

    def __init__(self, state_dir: str, ttl: float = DEFAULT_TTL) -> None:
        self.secret = load_secret(state_dir)
        self.ttl = ttl
        self.path = os.path.join(state_dir, REVOKED_FILE)
        self._seen: tuple[int, ...] | None = None
        self._revoked: dict[int, int] = {}

    def make(self, uid: int) -> str:
        """A new token of ``uid`` (made after any revocation of theirs, even in the same ms)."""
        now = time.time_ns() // 1_000_000
        return make_token(self.secret, uid, max(now, self.revoked().get(uid, -1) + 1))

    def check(self, token: str) -> int | None:
        return check_token(self.secret, token, self.ttl, self.revoked())

    def revoked(self) -> dict[int, int]:
        """uid -> until when (Unix ms) their tokens are revoked; read again when it changed."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._seen, self._revoked = None, {}
            return self._revoked
        except OSError:
            return self._revoked
        seen = (st.st_ino, st.st_size, st.st_mtime_ns)
        if seen != self._seen:
            self._revoked = _read_revoked(self.path)
            self._seen = seen
        return self._revoked

    def revoke(self, uid: int) -> None:
        """Every token of ``uid`` made until now stops being valid (kept across restarts)."""
        revoked = dict(self.revoked())
        revoked[uid] = time.time_ns() // 1_000_000
        data = json.dumps({str(k): v for k, v in sorted(revoked.items())}).encode()
        tmp = f"{self.path}.{os.getpid()}.tmp"
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        try:
            try:
                if os.write(fd, data) != len(data):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), tmp)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except BaseException:  # (a full disk: no half-written file left behind in root's dir)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._seen, self._revoked = None, revoked


def _read_revoked(path: str) -> dict[int, int]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise BerthError(f"{path} must be a regular file of uid {os.geteuid()}: remove it")
        data = json.loads(os.read(fd, 1 << 20) or b"{}")
    except ValueError:
        data = {}
    finally:
        os.close(fd)
    out: dict[int, int] = {}
    if isinstance(data, dict):
        for k, v in data.items():
            if isinstance(k, str) and k.isdigit() and isinstance(v, int):
                out[int(k)] = v
    return out


def bearer(headers: dict[str, str]) -> str | None:
    """The token of an ``Authorization: Bearer`` header, if any."""
    value = headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def peer_for(uid: int, admin_gid: int | None, rules: Options | None = None) -> Peer:
    """The Peer a request with this uid's token acts as: admin if root or (with [claims]
    admin_group) a member of that group, as on the socket; judged by the daemon's ``rules``
    (``--private``, who the admins are) as on the socket."""
    try:
        pw = pwd.getpwuid(uid)
        gid, name = pw.pw_gid, pw.pw_name
    except KeyError:
        gid, name = -1, None
    admin = uid == 0
    if not admin and admin_gid is not None and name is not None:
        try:
            admin = admin_gid in os.getgrouplist(name, gid)
        except OSError:
            admin = False
    return Peer(0, uid, gid, admin, rules)


def anonymous(rules: Options | None = None) -> Peer:
    """The Peer of a request without a token: reads only (no uid owns anything)."""
    peer = object.__new__(Peer)
    peer.pid, peer.uid, peer.gid, peer.admin, peer.user = 0, -1, -1, False, "anonymous"
    peer.rules = rules
    return peer


def token_handler(
    url: Callable[[], str | None], state_dir: str, ttl: float,
    unavailable: Callable[[], str | None],
) -> Handler:  # fmt: skip
    """The handler of the ``web_token`` request, which the daemon's start-up registers with
    its socket server: the caller's token, and the dashboard's address (``url()``: known once
    its port is bound, ``--http 127.0.0.1:0`` included) if served;
    with ``revoke``, every token of the caller made so far is revoked first (the reply's
    token is a new one). ``state_dir``, ``ttl``: the tokens' (:class:`Tokens`); ``unavailable()``: why the
    dashboard is not served now (its port held by another process), or None."""

    def web_token(front: Front, peer: Peer, req: dict[str, Any]) -> dict[str, Any]:
        revoke = bool(req.get("revoke"))
        tokens = Tokens(state_dir, ttl)
        if revoke:
            tokens.revoke(peer.uid)
        why = unavailable()  # (its port held by another process)
        return {
            "token": tokens.make(peer.uid), "user": peer.user, "uid": peer.uid, "url": url(),
            "expires": time.time() + tokens.ttl, "revoked": revoke, "unavailable": why,
        }  # fmt: skip

    return web_token
