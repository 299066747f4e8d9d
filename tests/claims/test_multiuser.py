"""Claims across Unix users: they see each other's claims; a user can neither remove, rewrite,
replace nor release another's; root's `berth release` can end them.

The test creates two users (berth-test-a, berth-test-b) and runs code as them in forked
children that drop privileges (setgid/setuid) after importing what they need, because the
interpreter may live where other users cannot read it (e.g. under /root). The GPUs are a
declared inventory, so no NVML (and no root-only fake state file) is involved.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until

USERS = ("berth-test-a", "berth-test-b")
PRELOAD = (
    "argparse", "ctypes", "errno", "fcntl", "grp", "json", "pwd", "select", "shlex", "struct",
    "tomllib", "urllib.parse", "zlib", "berth.api", "berth.claims.admin", "berth.claims.fairness",
    "berth.claims.files", "berth.claims.lease", "berth.claims.ledger", "berth.claims.paths",
    "berth.claims.waiting", "berth.claims.wake", "berth.cli.main", "berth.cli.release",
    "berth.devices", "berth.devices.inventory", "berth.devices.visible", "berth.lease",
    "berth.select", "berth.units",
)  # fmt: skip


def _ensure_user(name: str) -> pwd.struct_passwd:
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


@pytest.fixture
def shared(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, AsUser]]:
    if os.geteuid() != 0:
        pytest.fail("this test needs root (CI runs as root): it creates users")
    for u in USERS:
        _ensure_user(u)
    top = tempfile.mkdtemp(prefix="berth-users-")
    os.chmod(top, 0o1777)  # like /tmp: the first user to claim creates the ledger there
    claims = os.path.join(top, "claims")
    cfg = os.path.join(top, "config.toml")
    Path(cfg).write_text('[inventory]\ngpus = 4\nmemory = "80G"\n')
    os.chmod(cfg, 0o644)
    monkeypatch.setenv("BERTH_CONFIG", cfg)
    monkeypatch.setenv("BERTH_CLAIMS_DIR", claims)
    from berth import config

    config.reset()
    runner = AsUser()
    try:
        yield claims, runner
    finally:
        runner.cleanup()
        config.reset()
        shutil.rmtree(top, ignore_errors=True)


def _claim(only: str) -> Any:
    from berth.lease import build_request, claim

    lease, _ = claim(build_request(1, only=only), timeout=0)
    return lease.paths


def _claims() -> Any:
    from berth.claims.ledger import Ledger

    return sorted((c.index, c.user) for c in Ledger().scan().claims)


def test_two_users_see_but_cannot_touch_each_others_claims(shared: Any) -> None:
    claims_dir, run = shared
    a_pid, (a_path,) = run.start("berth-test-a", lambda: _claim("0"), hold=True)
    assert os.stat(claims_dir).st_mode & 0o7777 == 0o1777  # created shared, by user a
    _, (_b_path,) = run.start("berth-test-b", lambda: _claim("1"), hold=True)
    assert Path(a_path).stat().st_uid == pwd.getpwnam("berth-test-a").pw_uid

    def b_tries() -> Any:
        from berth.claims import files
        from berth.cli.main import main
        from berth.errors import WaitTimeout

        seen = _claims()
        try:
            _claim("0")
            took = True
        except WaitTimeout:
            took = False
        outcomes = {}
        for what, act in (
            ("unlink", lambda: os.unlink(a_path)),
            ("write", lambda: open(a_path, "r+b").close()),
            ("replace", lambda: os.close(files.create_locked(claims_dir, os.path.basename(a_path), b"{}", "x"))),
        ):  # fmt: skip
            try:
                act()
                outcomes[what] = "done"
            except PermissionError:
                outcomes[what] = "refused"
        return {
            "seen": seen,
            "took": took,
            "outcomes": outcomes,
            "release": main(["release", "0", "--yes"]),
        }

    _, got = run.start("berth-test-b", b_tries)
    assert got["seen"] == [[0, "berth-test-a"], [1, "berth-test-b"]]
    assert got["took"] is False
    assert got["outcomes"] == {"unlink": "refused", "write": "refused", "replace": "refused"}
    assert got["release"] == 4  # Refused
    _, seen_by_a = run.start("berth-test-a", _claims)
    assert seen_by_a == [[0, "berth-test-a"], [1, "berth-test-b"]]

    # root, the admin, may end a's claim: SIGTERM to its holder, and the GPU is free.
    r = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "release", "0", "--yes", "--grace", "5"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "berth-test-a" in r.stdout and "ended 1 claim" in r.stdout
    wait_until(
        lambda: os.waitpid(a_pid, os.WNOHANG)[0] == a_pid, timeout=5, message="a's holder to end"
    )
    run.children.remove(a_pid)
    assert _claims() == [(1, "berth-test-b")]


def test_release_asks_first_and_users_may_release_their_own(shared: Any) -> None:
    _claims_dir, run = shared
    run.start("berth-test-a", lambda: _claim("2"), hold=True)
    no = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "release", "2"],
        input="n\n", capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert no.returncode == 1 and "[y/N]" in no.stdout and "nothing done" in no.stdout
    assert _claims() == [(2, "berth-test-a")]

    def own() -> Any:
        from berth.cli.main import main

        return main(["release", "2", "--yes", "--grace", "5"])

    _, code = run.start("berth-test-a", own)
    assert code == 0
    assert _claims() == []
