"""A user's own daemon (not root) serves its user only (docs/daemon.md: "Your own daemon's
socket is mode 0600 ...; it runs your jobs only (a submit from another user is refused)"),
as another user meets it: user A runs `berth daemon` (a real process of A's, not root's),
user B runs `berth submit` at its socket. With the socket as the daemon made it, B cannot
connect; with the socket opened to everyone (A's own doing: `chmod 666`), the daemon refuses
B's submit naming whose daemon it is and where B should submit, and nothing is queued."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from typing import Any

from helpers import wait_until
from userkit import A, B, berth_as, ensure_users, passwd, python_as

from berth.errors import EXIT_NO_DAEMON, EXIT_REFUSED


def _as_a(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as A, in a process of A's own (A's daemon is talked to as A talks to it)."""
    return subprocess.run([*python_as(A, env), "-m", "berth", *args], capture_output=True,
                          text=True, timeout=60, cwd="/", check=False)  # fmt: skip


def test_a_users_own_daemon_refuses_another_users_submit(fake_gpus: Any,
                                                          fakenvml_lib_dir: str) -> None:  # fmt: skip
    ensure_users()
    fake_gpus.setup(n=1, memory="80G")
    a = passwd(A)
    top = tempfile.mkdtemp(prefix="bu-", dir="/tmp")  # (A's directory; B may pass through)
    daemon: subprocess.Popen[bytes] | None = None
    try:
        shutil.copy(fake_gpus.state_path, os.path.join(top, "nvml.json"))
        for sub in ("nvml.procs", "claims", "state", "pts"):
            os.mkdir(os.path.join(top, sub))
        for path in [top, *(os.path.join(top, n) for n in os.listdir(top))]:
            os.chown(path, a.pw_uid, a.pw_gid)
        os.chmod(top, 0o755)
        sock = os.path.join(top, "d.sock")
        env = {
            "PATH": "/usr/bin:/bin", "HOME": top, "USER": A, "LOGNAME": A, "BERTH_CONFIG": "",
            "LD_LIBRARY_PATH": fakenvml_lib_dir, "FAKE_NVML_STATE": os.path.join(top, "nvml.json"),
            "FAKE_NVML_PROCS": os.path.join(top, "nvml.procs"),
            "BERTH_CLAIMS_DIR": os.path.join(top, "claims"),
            "BERTH_STATE_DIR": os.path.join(top, "state"), "BERTH_SOCKET": sock,
            "BERTH_PTS_DIR": os.path.join(top, "pts"),
        }  # fmt: skip
        with open(os.path.join(top, "daemon.out"), "wb") as out:
            daemon = subprocess.Popen(
                [*python_as(A, env), "-m", "berth", "daemon", "--foreground"], cwd="/",
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

        def answers() -> bool:
            assert daemon is not None and daemon.poll() is None, _log(top)
            return _as_a(env, "queue", "--json").returncode == 0

        wait_until(answers, timeout=30, message="A's daemon answers A")
        assert os.stat(sock).st_uid == a.pw_uid  # (A's daemon, A's socket)
        mine = _as_a(env, "submit", "--hold", "--parsable", "--", "true")
        assert mine.returncode == 0, mine.stderr  # A's own submit is served

        theirs = {k: v for k, v in env.items() if k.startswith(("BERTH_", "FAKE_", "LD_"))}
        refused = berth_as(B, "submit", "--", "touch", "/tmp/never", env=theirs)
        assert refused.returncode == EXIT_NO_DAEMON, (refused.returncode, refused.stderr)
        assert sock in refused.stderr, refused.stderr  # (B cannot connect: mode 0600)

        chmod = subprocess.run([*python_as(A, env), "-c", f"import os; os.chmod({sock!r}, 0o666)"],
                               capture_output=True, text=True, check=False)  # fmt: skip
        assert chmod.returncode == 0, chmod.stderr  # A opens their socket to everyone
        refused = berth_as(B, "submit", "--", "touch", "/tmp/never", env=theirs)
        assert refused.returncode == EXIT_REFUSED, (refused.returncode, refused.stderr)
        assert f"runs as {A}" in refused.stderr and B in refused.stderr, refused.stderr
        assert "system daemon" in refused.stderr, refused.stderr  # (where to submit)
        dry = berth_as(B, "submit", "--dry-run", "--", "true", env=theirs)
        assert dry.returncode == EXIT_REFUSED, dry.stderr  # (a dry run is refused alike)

        queue = _as_a(env, "queue", "--all", "--json")
        assert queue.returncode == 0, queue.stderr
        jobs = json.loads(queue.stdout)["jobs"]
        assert [(j["user"], j["state"]) for j in jobs] == [(A, "PENDING")], jobs  # B's: none
    finally:
        if daemon is not None:
            if daemon.poll() is None:
                os.killpg(daemon.pid, signal.SIGTERM)
                try:
                    daemon.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(daemon.pid, signal.SIGKILL)
                    daemon.wait()
        shutil.rmtree(top, ignore_errors=True)


def _log(top: str) -> str:
    try:
        with open(os.path.join(top, "daemon.out")) as f:
            return f"A's daemon exited:\n{f.read()}"
    except OSError as e:
        return f"A's daemon exited (no log: {e})"
