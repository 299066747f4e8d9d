"""The client side of the daemon protocol: what every queue command talks through.

Deliberately tiny: imports only ``_socket`` (the C module, not socket.py), ``json`` and ``os`` (through
:mod:`berth.wire.protocol` and :mod:`berth.wire.paths`), so ``berth submit`` starts about
as fast as any Python client can.

    with Client() as c:
        job_id = c.call("submit", job={...})["job_id"]
"""

from __future__ import annotations

import _socket  # not socket.py: its enums and selectors cost every CLI start ~2 ms
import os
import sys

from berth import config
from berth.errors import (
    EXIT_REFUSED,
    EXIT_USAGE,
    BerthError,
    DaemonSilent,
    DaemonUnreachable,
    UsageError,
)
from berth.wire import paths, protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_EXIT = {
    protocol.NO_SUCH_JOB: EXIT_USAGE,
    protocol.NO_SUCH_GPU: EXIT_USAGE,
    protocol.BAD_REQUEST: EXIT_USAGE,
    protocol.NOT_OWNER: EXIT_REFUSED,
    protocol.TOO_MANY_CONNECTIONS: EXIT_REFUSED,
}


class DaemonError(BerthError):
    """The daemon refused a request; ``code`` is one of ``protocol.ERROR_CODES``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.exit_code = _EXIT.get(code, 1)


def unreachable(path: str, why: str) -> DaemonUnreachable:
    return DaemonUnreachable(
        f"no berth daemon answers on {path} ({why}); start one with `berth daemon` "
        "(or set BERTH_SOCKET to the socket of a running one)"
    )


def _why(e: OSError) -> str:
    if isinstance(e, FileNotFoundError):
        return "no socket file"
    if isinstance(e, ConnectionRefusedError):
        return "nobody listens: it has stopped"
    return e.strerror or str(e)


def _advice(tried: list[tuple[str, str, OSError]]) -> DaemonUnreachable:
    """The error when no candidate socket answered, with the advice that fits."""
    if len(tried) == 1:
        path, how, e = tried[0]
        if how == paths.ENV:
            return DaemonUnreachable(
                f"no berth daemon answers on {path} ({_why(e)}), the socket BERTH_SOCKET "
                "names: start one there with `berth daemon`, or unset BERTH_SOCKET to use "
                "your own or the system daemon"
            )
        if how == paths.CONFIG:
            return DaemonUnreachable(
                f"no berth daemon answers on {path} ({_why(e)}), the socket [daemon] socket "
                "in the config names: start it with `berth daemon`, or ask your admin"
            )
        return unreachable(path, _why(e))
    (own, _, own_e), (system, _, sys_e) = tried[0], tried[1]
    if not isinstance(sys_e, FileNotFoundError):
        fix = (
            "start it: `systemctl start berth` (`systemctl status berth` says why it stopped)"
            if os.geteuid() == 0
            else "ask your admin (`systemctl status berth`)"
        )
        return DaemonUnreachable(
            f"the system berth daemon does not answer on {system} ({_why(sys_e)}): {fix}; "
            "meanwhile you could start your own with `berth daemon`"
        )
    if not isinstance(own_e, FileNotFoundError):
        return DaemonUnreachable(
            f"your berth daemon does not answer on {own} ({_why(own_e)}): start it again "
            "with `berth daemon`"
        )
    if os.geteuid() == 0:
        return DaemonUnreachable(
            f"no berth daemon is running (no system daemon on {system}, none of your own on "
            f"{own}): start the system daemon with `systemctl start berth` or `berth daemon "
            "--system` (docs/admin.md), or your own with `berth daemon`"
        )
    return DaemonUnreachable(
        f"no berth daemon is running (no system daemon on {system}, none of your own on "
        f"{own}): start your own with `berth daemon`; on a shared machine, ask your admin "
        "for the system one (docs/admin.md)"
    )


def _server_uid(sock: _socket.socket) -> int:
    """The uid of the process serving ``sock`` (SO_PEERCRED: pid, uid, gid; no `struct`)."""
    raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    return int.from_bytes(raw[4:8], sys.byteorder, signed=True)


def _impostor(path: str, how: str, uid: int) -> DaemonUnreachable:
    import pwd  # rare: an impostor

    try:
        name = f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        name = f"uid {uid}"
    whose = "root's (the system daemon)" if how == "system" else "yours"
    return DaemonUnreachable(
        f"the socket {path} should be {whose} but {name} serves it: not talking to it (it "
        "could be posing as berth to see your jobs); tell your admin, or set BERTH_SOCKET to "
        "a daemon you trust"
    )


POLL = 1.0  # seconds: a read that waits looks at the daemon's state this often (client_wait)
PATIENCE = 60.0  # seconds of silence before an answer due at once is given up (the default)
PATIENCE_ENV = "BERTH_ANSWER_TIMEOUT"


def _patience() -> float:
    """The seconds of silence before an answer due at once is given up: ``BERTH_ANSWER_TIMEOUT``
    (seconds, > 0), else :data:`PATIENCE` (far above the slowest answer measured: a
    100,000-job queue, bench/RESULTS.md); a bad value: a UsageError naming it."""
    raw = os.environ.get(PATIENCE_ENV)
    if not raw:
        return PATIENCE
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise UsageError(
            f"{PATIENCE_ENV}={raw!r}: expected the seconds to wait for the daemon's answer (a "
            f"number above 0, e.g. 120); unset it for the default ({PATIENCE:g})"
        )
    return value


_warned: set[str] = set()  # squatted paths this process has warned of (once each)


def _skip(path: str, why: str) -> None:
    """Say once on stderr that the user's own socket ``path`` is skipped (not theirs)."""
    if path not in _warned:
        _warned.add(path)
        sys.stderr.write(
            f"berth: warning: skipping {path}: {why}; not talking to it (it could be posing "
            "as your daemon); trying the next one\n"
        )


def _squatted(path: str, why: str, after: list[tuple[str, str, OSError]]) -> DaemonUnreachable:
    """The error when the user's own socket was squatted and nothing after it answered."""
    tail = "; ".join(f"no daemon answers on {p} ({_why(e)})" for p, _, e in after)
    return DaemonUnreachable(
        f"your own berth daemon's socket {path} is not yours ({why}): not talking to it"
        + (f"; {tail}" if tail else "")
        + f". Ask your admin to remove {os.path.dirname(path)}, or set XDG_RUNTIME_DIR (a "
        "directory only you can write: your login's /run/user/UID) or BERTH_SOCKET to a "
        "socket of a daemon you trust"
    )


def current_umask() -> int:
    """This process's umask, read without changing it (/proc), else set and set back."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


class Client:
    """One connection to the daemon. The handshake is sent with the first request.

    Without ``path``: the socket that :func:`berth.wire.paths.candidates` finds (the
    user's own daemon if it answers, else the system daemon); ``via`` says which kind it is.
    A discovered socket must be served by its rightful owner (the user, or root for the
    system one; SO_PEERCRED): anyone can create a file in a sticky directory like
    /run/berth while the real daemon is down."""

    def __init__(self, path: str | None = None, timeout: float | None = 0.0) -> None:
        """``timeout``: the seconds of silence after which an answer is given up
        (:mod:`berth.client_wait`); 0: its :func:`_patience` (60 s,
        ``BERTH_ANSWER_TIMEOUT``); None: none, while the daemon is not stopped."""
        if timeout == 0.0:
            timeout = _patience()
        if path is not None:
            tried = [(path, "given")]
        else:
            configured = system = None
            if not os.environ.get("BERTH_SOCKET"):  # else the config file cannot matter
                try:
                    cfg = config.get()
                    configured, system = cfg.socket, cfg.system_socket
                except BerthError:
                    pass
            tried = paths.candidates(configured, system)
        failed: list[tuple[str, str, OSError]] = []
        skipped: tuple[str, str] | None = None  # (the user's own socket, why it is not theirs)
        for where, how in tried:
            own = how in (paths.PRIVATE, paths.ALLOCATION)
            if own and (why := paths.squatted(where)) is not None:
                _skip(where, why)
                skipped = (where, why)
                continue
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            sock.settimeout(_patience() if timeout is None else timeout)  # (a full backlog)
            try:
                sock.connect(where)
            except OSError as e:
                sock.close()
                failed.append((where, how, e))
                continue
            owner = {
                paths.PRIVATE: os.getuid(),
                paths.ALLOCATION: os.getuid(),
                paths.SYSTEM: 0,
            }.get(how)
            if owner is not None and (uid := _server_uid(sock)) != owner:
                sock.close()
                if not own:
                    raise _impostor(where, how, uid)
                why = f"{paths.squatted_by(uid)} serves it"
                _skip(where, why)
                skipped = (where, why)
                continue
            self._sock, self.path, self.via = sock, where, how
            break
        else:
            if skipped is not None:
                raise _squatted(*skipped, failed)
            raise _advice(failed)
        self._buf = bytearray()
        self._greeted = False
        self.server: dict[str, Any] = {}
        self._asked = ""  # the kind of the last request sent (what a silence is about)
        self.settimeout(timeout)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def fileno(self) -> int:
        return self._sock.fileno()

    @property
    def timeout(self) -> float | None:
        return self._limit

    def settimeout(self, timeout: float | None) -> None:
        """The seconds of silence after which an answer is given up (None: never, while the
        daemon is not stopped); read in steps of at most a second (berth.client_wait)."""
        self._limit = timeout
        self._sock.settimeout(POLL if timeout is None else min(timeout, POLL))

    def send(self, kind: str, **fields: Any) -> None:
        """Send one request without reading its response (pipelining; see :meth:`receive`)."""
        data = b""
        if not self._greeted:
            data = protocol.encode(
                {"type": "hello", "version": protocol.PROTOCOL_VERSION, "client": "berth"}
            )
        if kind == "submit":
            job = fields.get("job")
            if isinstance(job, dict) and "umask" not in job:  # the job's files: as ours
                fields["job"] = {**job, "umask": current_umask()}
        fields["type"] = kind
        self._asked = kind
        data += protocol.encode(fields)
        try:
            self._sock.settimeout(_patience() if self._limit is None else self._limit)
            self._sock.sendall(data)  # (a large request to a busy daemon: not in 1 s steps)
            self._sock.settimeout(POLL if self._limit is None else min(self._limit, POLL))
        except TimeoutError:
            from berth import client_wait  # rare: a daemon that reads nothing

            waited = self._sock.gettimeout() or 0.0
            raise client_wait.silent(self.path, self._sock, waited, kind) from None
        except OSError as e:
            raise unreachable(self.path, f"connection lost: {e.strerror or e}") from None
        if not self._greeted:
            self._greeted = True
            self.server = self.receive()

    def _read_frame(self) -> bytes:
        header = protocol.HEADER_SIZE
        silent_for = stopped_for = 0.0  # (seconds: no byte came; the daemon seen stopped)
        while True:
            if len(self._buf) >= header:
                n = protocol.frame_length(self._buf)
                if n > protocol.MAX_RESPONSE:
                    raise BerthError(f"daemon sent a frame of {n} bytes; refusing it")
                if len(self._buf) >= header + n:
                    payload = bytes(self._buf[header : header + n])
                    del self._buf[: header + n]
                    return payload
            try:
                chunk = self._sock.recv(1 << 20)
            except TimeoutError:
                from berth import client_wait  # rare: a daemon slow to answer

                step = self._sock.gettimeout() or POLL
                silent_for += step
                stopped_for = client_wait.still_waiting(
                    self.path, self._sock, self._asked, silent_for, stopped_for, self._limit, step
                )
                continue
            except OSError as e:
                raise unreachable(self.path, f"connection lost: {e.strerror or e}") from None
            if not chunk:
                raise unreachable(self.path, "it closed the connection")
            self._buf += chunk
            silent_for = stopped_for = 0.0

    def receive(self) -> dict[str, Any]:
        """The next response; raises DaemonError if it is an error."""
        msg: dict[str, Any] = protocol.decode(self._read_frame())
        if not msg.get("ok"):
            err = msg.get("error") or {}
            raise DaemonError(str(err.get("code")), str(err.get("message")))
        return msg

    def receive_raw(self) -> bytes:
        """The next response as the daemon sent it (UTF-8 JSON, ``{"ok":true,...}``), not
        decoded, for output that passes it through; raises DaemonError if it is an error."""
        payload = self._read_frame()
        if not payload.startswith(b'{"ok":true'):
            msg = protocol.decode(payload)
            if not msg.get("ok"):
                err = msg.get("error") or {}
                assert isinstance(err, dict)
                raise DaemonError(str(err.get("code")), str(err.get("message")))
        return payload

    def call(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Send one request and return its response."""
        self.send(kind, **fields)
        return self.receive()


def call(kind: str, **fields: Any) -> dict[str, Any]:
    """One request on a fresh connection."""
    with Client() as c:
        return c.call(kind, **fields)


def try_status(timeout: float = 2.0) -> dict[str, Any] | None:
    """The daemon's view for ``berth status`` (jobs per GPU, waiting count), or None when no
    daemon answers. Never raises for an absent daemon; DaemonSilent for one that accepts and
    does not answer in ``timeout`` seconds (BERTH_ANSWER_TIMEOUT's, when it is set)."""
    if os.environ.get(PATIENCE_ENV):
        timeout = _patience()  # (a bad value: its UsageError)
    try:
        with Client(timeout=timeout) as c:
            return c.call("status")
    except (DaemonSilent, UsageError):  # (UsageError: a bad BERTH_ANSWER_TIMEOUT)
        raise
    except BerthError:
        return None
