"""Run code as other Unix users (for the multi-user claims tests; needs root, as CI runs).

:class:`AsUser` forks a child that drops privileges (setgid/setuid) after importing what it
needs, because the interpreter may live where other users cannot read it (e.g. under /root);
the child's JSON result comes back through a pipe. The ``shared`` fixture (conftest.py) makes
a ledger directory shared like /tmp, and a config declaring 4 GPUs (no NVML involved).
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
from collections.abc import Callable
from typing import Any

USERS = ("berth-test-a", "berth-test-b")  # b plays mallory in the hostile tests
PRELOAD = (
    "argparse", "ctypes", "errno", "fcntl", "grp", "json", "pwd", "random", "select", "shlex",
    "socket", "struct", "tomllib", "urllib.parse", "zlib", "berth.api", "berth.claims.admin",
    "berth.claims.fairness", "berth.claims.files", "berth.claims.claim", "berth.claims.ledger",
    "berth.claims.paths", "berth.claims.waiting", "berth.claims.wake", "berth.cli.main",
    "berth.cli.release", "berth.devices", "berth.devices.declared", "berth.devices.visible",
    "berth.lease", "berth.choose", "berth.filters", "berth.units",
)  # fmt: skip


def ensure_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-M", "-r", "-s", "/usr/sbin/nologin", name], check=True)
        return pwd.getpwnam(name)


class AsUser:
    """Fork a child that becomes ``user`` and runs ``fn``; its JSON result comes back."""

    def __init__(self) -> None:
        self.children: list[int] = []

    def start(self, user: str, fn: Callable[[], Any], *, hold: bool = False) -> tuple[int, Any]:
        """Run ``fn`` as ``user``; ``hold``: the child then stays (paused) until cleanup."""
        import importlib

        from berth import config

        pw = pwd.getpwnam(user)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            try:
                os.close(r)
                for module in PRELOAD:
                    importlib.import_module(module)
                config.reset()
                config.get()
                os.setgroups([])
                os.setgid(pw.pw_gid)
                os.setuid(pw.pw_uid)
                os.environ["HOME"] = "/"
                result: Any = fn()
                os.write(w, (json.dumps({"ok": result}) + "\n").encode())
                if hold:
                    signal.pause()
            except BaseException as e:  # report anything to the parent
                os.write(w, (json.dumps({"error": f"{type(e).__name__}: {e}"}) + "\n").encode())
            finally:
                os._exit(0)
        os.close(w)
        self.children.append(pid)
        with os.fdopen(r) as f:
            line = f.readline()
        reply = json.loads(line)
        assert "error" not in reply, reply["error"]
        if not hold:
            os.waitpid(pid, 0)
            self.children.remove(pid)
        return pid, reply["ok"]

    def cleanup(self) -> None:
        for pid in self.children:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
