"""docs/daemon.md, "Starting and stopping": one daemon per socket and per state directory (a
second one is refused: two daemons on one queue would run its jobs twice), and a socket file
left by a dead daemon is detected by connecting to it and replaced."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any


def _second(daemon: Any, socket: str, state: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "daemon", "--foreground",
         "--socket", socket, "--state-dir", state],
        env=daemon.env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_a_second_daemon_is_refused_and_a_dead_ones_socket_replaced(daemon: Any) -> None:
    daemon.start()
    job = daemon.submit("sleep", "600", hold=True)
    other_state = os.path.join(daemon.sockdir, "other-state")
    other_socket = os.path.join(daemon.sockdir, "other.sock")
    same_state = _second(daemon, other_socket, daemon.state_dir)
    assert same_state.returncode != 0
    assert f"another berth daemon already uses state dir {daemon.state_dir}" in same_state.stderr
    assert not os.path.exists(other_socket)
    same_socket = _second(daemon, daemon.socket, other_state)
    assert same_socket.returncode != 0
    assert f"socket {daemon.socket}" in same_socket.stderr, same_socket.stderr
    # The first one serves on, its queue as it was.
    assert daemon.job(job)["state"] == "PENDING" and daemon.job(job)["held"]
    daemon.kill9()  # its socket file stays, nobody answers on it
    assert os.path.exists(daemon.socket)
    daemon.start()  # replaced: the next daemon serves the same queue there
    assert daemon.job(job)["state"] == "PENDING"
    daemon.call("cancel", job_ids=[job])
