"""Commands run as on a user's terminal: on a pseudo-terminal of a given size (`on_terminal`),
or in tmux, whose screen a test reads as the user sees it (`Tmux`)."""

from __future__ import annotations

import fcntl
import os
import pty
import shutil
import struct
import subprocess
import termios
import uuid
from collections.abc import Mapping, Sequence

import pytest


def on_terminal(
    argv: Sequence[str], env: Mapping[str, str], rows: int = 24, columns: int = 80
) -> tuple[int, str]:
    """Run ``argv`` with its stdout a terminal of ``rows`` x ``columns``: (exit code, what it
    wrote there, with "\\n" line ends)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {k: v for k, v in env.items() if k not in ("LINES", "COLUMNS")}
    proc = subprocess.Popen(list(argv), env=env, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # (EIO: the other end closed)
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    code = proc.wait(timeout=60)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert "Traceback" not in err, err
    return code, out.decode().replace("\r\n", "\n")


class Tmux:
    """A detached tmux session of ``columns`` x ``rows`` running a shell command."""

    def __init__(self, command: str, columns: int = 80, rows: int = 24) -> None:
        if shutil.which("tmux") is None:
            pytest.fail("tmux is needed for this test (apt-get install tmux)")
        self.name = f"berth-term-{uuid.uuid4().hex[:8]}"
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", str(columns),
                        "-y", str(rows), command], check=True)  # fmt: skip

    def screen(self) -> list[str]:
        out = subprocess.run(["tmux", "capture-pane", "-p", "-t", f"{self.name}:0.0"],
                             capture_output=True, text=True, check=False)  # fmt: skip
        return out.stdout.rstrip("\n").split("\n")

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", f"{self.name}:0.0", *keys], check=True)

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], check=False)

    def __enter__(self) -> Tmux:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
