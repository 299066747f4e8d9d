"""Run berth as other Unix users, for the system-daemon tests (root only, as CI runs).

The users are created once (``useradd``; reused if they exist). Code runs as them in a forked
child that becomes the user for good (initgroups, setgid, setuid) *after* importing what it
needs: the interpreter may live where other users cannot read (under /root), so nothing may
be imported after the switch. :func:`berth_as` runs the real CLI (``berth.cli.main.main``) that
way, with the user's umask and a login-like environment, and returns its exit status and
output; :func:`call_as` runs any function and returns its JSON-able result.
"""

from __future__ import annotations

import grp
import importlib
import json
import os
import pwd
import subprocess
import tempfile
from collections.abc import Callable
from typing import Any

PRELOAD = (
    "argparse", "errno", "fcntl", "grp", "json", "pwd", "select", "shlex", "signal", "socket",
    "termios", "time", "tomllib", "tty", "berth.cli.main", "berth.cli.submit",
    "berth.cli.command", "berth.cli.queue", "berth.cli.show", "berth.cli.logs",
    "berth.cli.cancel", "berth.cli.hold", "berth.cli.attach", "berth.cli.pause",
    "berth.client", "berth.config", "berth.daemon.engine.command", "berth.wire.paths",
    "berth.wire.protocol", "berth.wire.ptyframes", "berth.wire.env", "berth.wire.inject",
    "berth.daemon.supervisor.ptyrelay", "berth.errors", "berth.units",
)  # fmt: skip

TEAM = "berth-sys-team"  # a supplementary group of user A
ADMINS = "berth-sys-adm"  # the admin group; user C is in it
A, B, C = "berth-sys-a", "berth-sys-b", "berth-sys-c"


def _group(name: str) -> None:
    try:
        grp.getgrnam(name)
    except KeyError:
        subprocess.run(["groupadd", "-r", name], check=True)


def ensure_users() -> None:
    """Users A (also in TEAM), B, C (also in ADMINS), each with a group of their own."""
    _group(TEAM)
    _group(ADMINS)
    for name, extra in ((A, TEAM), (B, None), (C, ADMINS)):
        try:
            pwd.getpwnam(name)
        except KeyError:
            _group(name)
            cmd = ["useradd", "-M", "-r", "-g", name, "-s", "/usr/sbin/nologin", name]
            subprocess.run(cmd, check=True)
        if extra and name not in grp.getgrnam(extra).gr_mem:
            subprocess.run(["usermod", "-aG", extra, name], check=True)


def _become(name: str, umask: int, env: dict[str, str]) -> None:
    for module in PRELOAD:
        importlib.import_module(module)
    pw = pwd.getpwnam(name)
    os.initgroups(name, pw.pw_gid)
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)
    os.umask(umask)
    os.environ.clear()
    os.environ.update(
        {"HOME": pw.pw_dir, "USER": name, "LOGNAME": name, "PATH": "/usr/bin:/bin", **env}
    )
    from berth import config

    config.reset()


def call_as(
    name: str, fn: Callable[[], Any], *, umask: int = 0o022, env: dict[str, str] | None = None
) -> Any:
    """``fn()`` run as user ``name``; its JSON result, or {"error": ...} if it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.close(r)
            _become(name, umask, env or {})
            out: Any = {"ok": fn()}
        except BaseException as e:
            out = {"error": type(e).__name__, "message": str(e)}
        try:
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    os.waitpid(pid, 0)
    reply = json.loads(data)
    if "error" in reply:
        return reply
    return reply["ok"]


def berth_as(
    name: str, *args: str, umask: int = 0o022, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI ``berth ARGS`` run as user ``name`` (in a forked child: see the docstring)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            code = 70
            try:
                import sys

                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.stdout = open(1, "w", closefd=False)  # (not pytest's capture)
                sys.stderr = open(2, "w", closefd=False)
                _become(name, umask, env or {})
                from berth.cli.main import main

                code = main(list(args))
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
