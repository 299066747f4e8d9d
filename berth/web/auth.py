"""Who a web request acts as: per-user tokens, made by the daemon and checked in constant time.

A token is ``berth1.<uid>.<mac>`` where ``mac`` is HMAC-SHA256 over the uid with the daemon's
web secret (32 random bytes in ``<state dir>/web.secret``, mode 0600, made on first use), cut
to 128 bits. Only the daemon can make one, and it makes one only for the caller of the
``web_token`` request on its UNIX socket, whose uid the kernel vouches for (SO_PEERCRED):
``berth web-token`` prints the caller's own token. A request carrying a valid token (the
``Authorization: Bearer`` header; never a cookie, which every port of localhost would be
sent) acts as that uid, through the same handlers and ownership checks as the socket.

Tokens do not expire; removing ``web.secret`` and restarting the daemon revokes them all.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pwd
import stat

from berth.daemon.requests.handlers import Peer
from berth.errors import BerthError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine.engine import Engine

SECRET_FILE = "web.secret"
PREFIX = "berth1"


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


def make_token(secret: bytes, uid: int) -> str:
    mac = hmac.new(secret, f"berth-web:{uid}".encode(), hashlib.sha256).hexdigest()[:32]
    return f"{PREFIX}.{uid}.{mac}"


def check_token(secret: bytes, token: str) -> int | None:
    """The uid a token stands for, or None if it is not one this daemon made."""
    parts = token.split(".")
    uid_text = parts[1] if len(parts) == 3 else ""
    if parts[0] != PREFIX or not (uid_text.isascii() and uid_text.isdigit()) or len(uid_text) > 10:
        return None  # (isascii: "²" is a digit to str.isdigit, not to int())
    uid = int(parts[1])
    if not hmac.compare_digest(make_token(secret, uid).encode(), token.encode(errors="replace")):
        return None
    return uid


def bearer(headers: dict[str, str]) -> str | None:
    """The token of an ``Authorization: Bearer`` header, if any."""
    value = headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def peer_for(uid: int, admin_gid: int | None) -> Peer:
    """The Peer a request with this uid's token acts as: admin if root or (with [claims]
    admin_group) a member of that group, as on the socket."""
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
    return Peer(0, uid, gid, admin)


def anonymous() -> Peer:
    """The Peer of a request without a token: reads only (no uid owns anything)."""
    peer = object.__new__(Peer)
    peer.pid, peer.uid, peer.gid, peer.admin, peer.user = 0, -1, -1, False, "anonymous"
    return peer


def token_reply(engine: Engine, peer: Peer) -> dict[str, Any]:
    """The ``web_token`` request: the caller's token, and the dashboard's address if served."""
    from berth.web import server  # cycle: the server imports this module

    token = make_token(load_secret(engine.opts.state_dir), peer.uid)
    url = server.ACTIVE.url if server.ACTIVE is not None else None
    return {"token": token, "user": peer.user, "uid": peer.uid, "url": url}
