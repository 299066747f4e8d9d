"""Act as other Unix users in tests (needs root, as CI runs the suite): ``from userkit import
call_as`` from any test folder (``tests/`` is on ``sys.path``, as for ``helpers``).

Users. :func:`ensure_user` makes a system user (a group of its own, no home, no login shell)
unless it exists, and never deletes it: test runs side by side share the users. The claims
tests act as :data:`USERS`; the system-daemon tests as :data:`A` (also in group :data:`TEAM`),
:data:`B` and :data:`C` (an admin through group :data:`ADMINS`; :func:`ensure_users`);
:data:`NOBODY` is the uid of ``nobody``. A user is a name or a uid.

Running as a user. A forked child becomes the user for good: the user's groups from the user
database (initgroups), setgid, setuid, a umask, and an environment: by default the test's own
(``os.environ``, as the fixtures set it) with the user's HOME, USER and LOGNAME; with ``env``
a login-like one, HOME, USER, LOGNAME and PATH=/usr/bin:/bin plus ``env``. The child imports
:data:`PRELOAD` (and ``preload``) *before* the switch: the interpreter may live where other
users cannot read (under /root), so nothing may be imported after it. When a module the
children need moves or is renamed, rename it here too, or the child fails with ImportError.

- :func:`call_as`: a function's JSON result, or ``{"error": TYPE, "message": ...}``;
- :func:`request_as`: one request to a daemon socket through berth's client, ``{"ok": reply}``
  or ``{"code": ..., "message": ...}``;
- :func:`berth_as`: the CLI (``berth.cli.main.main``) in the child, as a CompletedProcess;
- :func:`connect_as`: a raw connection to a Unix socket that the user made, handed to the
  caller (SCM_RIGHTS): its peer credentials stay the user's;
- :func:`listen_as`: a process of the user serving a Unix socket (accepting, saying nothing);
- :func:`python_as`: argv that runs Python as the user in a process of its own (``runuser``,
  Debian's interpreter of the same version, berth and this venv's packages on
  ``PYTHONPATH``): a daemon or an MCP server of that user's;
- :class:`AsUser`: children that stay alive (``hold=True``: holding what ``fn`` claimed) until
  :meth:`AsUser.cleanup`.
"""

from __future__ import annotations

import builtins
import grp
import importlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

PRELOAD = (
    "argparse", "ctypes", "errno", "fcntl", "grp", "json", "pwd", "random", "select", "shlex",
    "signal", "socket", "struct", "termios", "time", "tomllib", "tty", "urllib.parse", "zlib",
    "berth.api", "berth.selection.choose", "berth.claims.admin", "berth.claims.claim",
    "berth.claims.fairness", "berth.claims.files", "berth.claims.ledger", "berth.claims.paths",
    "berth.claims.waiting", "berth.claims.wake", "berth.cli.attach", "berth.cli.cancel",
    "berth.cli.command", "berth.cli.hold", "berth.cli.logs", "berth.cli.main",
    "berth.cli.pause", "berth.cli.queue", "berth.cli.release", "berth.cli.resubmit",
    "berth.cli.show", "berth.cli.submit", "berth.cli.update", "berth.client", "berth.config", "berth.daemon.engine.starts",
    "berth.daemon.supervisor.ptyrelay", "berth.devices", "berth.devices.declared",
    "berth.devices.visible", "berth.errors", "berth.selection.filters", "berth.api.lease", "berth.units",
    "berth.wire.env", "berth.wire.inject", "berth.wire.paths", "berth.wire.protocol",
    "berth.wire.ptyframes", "berth.cli.admin", "berth.admin.checks", "berth.devices.nvml",
    "sqlite3", "berth.admin.backup",
)  # fmt: skip

USERS = ("berth-test-a", "berth-test-b")  # the claims tests' users (b plays mallory)
TEAM = "berth-sys-team"  # a supplementary group of user A
ADMINS = "berth-sys-adm"  # the admin group; user C is in it
A, B, C = "berth-sys-a", "berth-sys-b", "berth-sys-c"  # the system-daemon tests' users
NOBODY = 65534  # uid of `nobody`

User = str | int  # a name or a uid


def ensure_group(name: str) -> int:
    """The gid of group ``name``, made (as a system group) if missing."""
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        pass
    made = subprocess.run(["groupadd", "-r", name], capture_output=True, text=True, check=False)
    try:  # (another test run may have made it meanwhile: then groupadd failed, and fine)
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise AssertionError(f"cannot make group {name}: {made.stderr.strip()}") from None


def ensure_user(name: str, *groups: str) -> pwd.struct_passwd:
    """User ``name``, made if missing (with a group of its own), and a member of ``groups``."""
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        ensure_group(name)
        cmd = ["useradd", "-M", "-r", "-g", name, "-s", "/usr/sbin/nologin", name]
        made = subprocess.run(cmd, capture_output=True, text=True, check=False)
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            raise AssertionError(f"cannot make user {name}: {made.stderr.strip()}") from None
    for group in groups:
        ensure_group(group)
        if name not in grp.getgrnam(group).gr_mem:
            cmd = ["usermod", "-aG", group, name]
            added = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if name not in grp.getgrnam(group).gr_mem:  # (else another run added it)
                raise AssertionError(f"cannot add {name} to {group}: {added.stderr.strip()}")
    return pw


def ensure_users() -> None:
    """Users A (also in TEAM), B, C (also in ADMINS)."""
    ensure_user(A, TEAM)
    ensure_user(B)
    ensure_user(C, ADMINS)


def passwd(user: User) -> pwd.struct_passwd:
    return pwd.getpwuid(user) if isinstance(user, int) else pwd.getpwnam(user)


def _become(user: User, umask: int, env: Mapping[str, str] | None, preload: Iterable[str]) -> None:
    """(In the child) import what it will need, then become ``user`` for good."""
    for module in (*PRELOAD, *preload):
        importlib.import_module(module)
    pw = passwd(user)
    os.initgroups(pw.pw_name, pw.pw_gid)
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)
    os.umask(umask)
    identity = {"HOME": pw.pw_dir, "USER": pw.pw_name, "LOGNAME": pw.pw_name}
    if env is None:
        os.environ.update(identity)
    else:
        os.environ.clear()
        os.environ.update({**identity, "PATH": "/usr/bin:/bin", **env})
    from berth import config

    config.reset()


def _fork(
    user: User,
    fn: Callable[[], Any],
    *,
    hold: bool = False,
    umask: int = 0o022,
    env: Mapping[str, str] | None = None,
    preload: Iterable[str] = (),
) -> tuple[int, dict[str, Any]]:
    """(pid, {"ok": fn()} or {"error": TYPE, "message": ...}) of a child run as ``user``;
    ``hold``: a child whose ``fn`` returned then waits for a signal (the caller reaps it),
    else it is reaped here."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.close(r)
            try:
                _become(user, umask, env, preload)
                out = json.dumps({"ok": fn()})
            except BaseException as e:  # report anything to the parent
                out = json.dumps({"error": type(e).__name__, "message": str(e)})
            with os.fdopen(w, "w") as f:
                f.write(out + "\n")
            if hold and out.startswith('{"ok"'):
                signal.pause()
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        line = f.readline()
    if not hold:
        os.waitpid(pid, 0)
    if not line:
        return pid, {"error": "ChildDied", "message": f"the child run as {user} said nothing"}
    reply: dict[str, Any] = json.loads(line)
    return pid, reply


def call_as(
    user: User,
    fn: Callable[[], Any],
    *,
    umask: int = 0o022,
    env: Mapping[str, str] | None = None,
    preload: Iterable[str] = (),
) -> Any:
    """``fn()`` run as ``user``: its JSON result, or {"error": TYPE, "message": ...} if it
    raised."""
    _, reply = _fork(user, fn, umask=umask, env=env, preload=preload)
    return reply["ok"] if "ok" in reply else reply


def request_as(user: User, path: str, kind: str, /, **fields: Any) -> dict[str, Any]:
    """One request to the daemon on socket ``path``, sent by ``user`` through berth's client
    (``fields`` may have a ``user`` of their own): {"ok": reply} or {"code": ...,
    "message": ...}."""

    def request() -> dict[str, Any]:
        from berth.client import Client, DaemonError

        try:
            with Client(path) as c:
                return {"ok": c.call(kind, **fields)}
        except DaemonError as e:
            return {"code": e.code, "message": str(e)}

    reply: dict[str, Any] = call_as(user, request)
    return reply


def berth_as(
    user: User, *args: str, umask: int = 0o022, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI ``berth ARGS`` run as ``user`` in a forked child (its exit status, stdout and
    stderr); pass ``env`` for a login-like environment (see the module's docstring)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            code = 70
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.stdout = open(1, "w", closefd=False)  # (not pytest's capture)
                sys.stderr = open(2, "w", closefd=False)
                _become(user, umask, env, ())
                from berth.cli.main import main

                code = main(list(args))
            except BaseException as e:
                print(f"berth_as: {type(e).__name__}: {e}", file=sys.stderr)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(
            list(args),
            os.waitstatus_to_exitcode(status),
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
        )


def connect_as(user: User, path: str, *, timeout: float | None = 10.0) -> socket.socket:
    """A connection to the Unix socket ``path`` that ``user`` made in a child, handed here
    (SCM_RIGHTS): whoever serves ``path`` sees ``user`` (SO_PEERCRED is taken at connect
    time) although the caller holds it. Raises what the user met (e.g. PermissionError)."""
    here, there = socket.socketpair()
    try:

        def connect() -> None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            socket.send_fds(there, [b"s"], [s.fileno()])

        _, reply = _fork(user, connect)
        if "error" in reply:
            kind = getattr(builtins, reply["error"], None)
            if not (isinstance(kind, type) and issubclass(kind, Exception)):
                kind = RuntimeError
            raise kind(f"as {user}: {reply['message']}")
        _, fds, _, _ = socket.recv_fds(here, 1, 1)
    finally:
        here.close()
        there.close()
    os.set_inheritable(fds[0], False)
    s = socket.socket(fileno=fds[0])
    s.settimeout(timeout)
    return s


class Listener:
    """A child of some user serving a Unix socket (:func:`listen_as`); :meth:`close` ends it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def listen_as(user: User, path: str, *, mode: int = 0o666) -> Listener:
    """A process of ``user`` serving ``path`` (the socket file is theirs, with ``mode``: anyone
    may connect by default): it accepts every connection and closes it at once, saying
    nothing; clients see ``user`` as its server (SO_PEERCRED)."""

    def serve() -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        os.chmod(path, mode)
        s.listen(8)

        def accept() -> None:
            while True:
                s.accept()[0].close()

        threading.Thread(target=accept, daemon=True).start()

    pid, reply = _fork(user, serve, hold=True)
    listener = Listener(pid)
    if "error" in reply:
        listener.close()
        raise AssertionError(f"{user} cannot serve {path}: {reply['error']}: {reply['message']}")
    return listener


def python_as(user: User, env: Mapping[str, str]) -> list[str]:
    """argv that runs Python as ``user`` in a process of its own (``runuser``), with berth of
    this checkout and this interpreter's site-packages: the test's interpreter may live where
    other users cannot enter (under /root), so Debian's of the same version runs instead,
    from ``PYTHONPATH`` (nothing on the machine is made readable for it). ``env`` is the
    whole environment (with ``PYTHONPATH`` added)."""
    import berth

    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    assert os.access(python, os.X_OK), f"{python}: needed to run Python as {user}"
    paths = [os.path.dirname(os.path.dirname(os.path.abspath(berth.__file__))),
             *(p for p in sys.path if "site-packages" in p)]  # fmt: skip
    pairs = [f"{k}={v}" for k, v in env.items()] + [f"PYTHONPATH={os.pathsep.join(paths)}"]
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    return [runuser, "-u", passwd(user).pw_name, "--", "env", "-i", *pairs, python]


class AsUser:
    """Children run as users: :meth:`start` runs ``fn`` as one and returns (pid, result),
    failing the test if ``fn`` raised; ``hold=True`` keeps the child alive (holding what
    ``fn`` claimed) until :meth:`cleanup`, which kills those left in :attr:`children`."""

    def __init__(
        self,
        *,
        umask: int = 0o022,
        env: Mapping[str, str] | None = None,
        preload: Iterable[str] = (),
    ) -> None:
        self.umask, self.env, self.preload = umask, env, tuple(preload)
        self.children: list[int] = []

    def start(self, user: User, fn: Callable[[], Any], *, hold: bool = False) -> tuple[int, Any]:
        pid, reply = _fork(
            user, fn, hold=hold, umask=self.umask, env=self.env, preload=self.preload
        )
        if hold:
            self.children.append(pid)
        assert "error" not in reply, f"{reply['error']}: {reply['message']}"
        return pid, reply["ok"]

    def cleanup(self) -> None:
        for pid in self.children:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self.children.clear()
