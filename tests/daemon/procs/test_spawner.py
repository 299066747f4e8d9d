"""Supervisors, driven directly: forked by the fork server (a fresh small interpreter, or a
fork if that cannot start), each runs attempt after attempt on its channel."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess

from helpers import wait_until

from berth.daemon.procs import spawner
from berth.daemon.supervisor import runfile
from berth.daemon.supervisor.attempt import receive

OWNER = {"uid": None, "gid": None, "user": None}


def _spec(tmp_path, job: int, argv: list[str]) -> dict:
    return {
        "argv": argv, "env": {"PATH": os.environ["PATH"]}, "cwd": str(tmp_path),
        "stdout": str(tmp_path / f"{job}.out"), "stderr": str(tmp_path / f"{job}.err"),
        "time_limit": None, "kill_after": 5, "pty": False,
    }  # fmt: skip


def _supervisor(sp: spawner.Spawner) -> tuple[socket.socket, int]:
    """A new supervisor: (our end of its channel, its pid)."""
    ours, theirs = spawner.pair()
    sp.request(7, OWNER, theirs.fileno())
    theirs.close()
    assert select.select([sp.sock], [], [], 15)[0], "no reply from the fork server"
    [(msg, pidfd)] = sp.replies()
    assert msg["slot"] == 7 and pidfd is not None, msg
    os.close(pidfd)
    return ours, int(msg["pid"])


def _send_run(chan: socket.socket, tmp_path, job: int, argv: list[str], spare=None) -> str:
    path = str(tmp_path / f"{job}.1")
    fd = runfile.open_run_file(path, spare)
    msg = {"op": "run", "job": job, "attempt": 1, "path": path, "spec": _spec(tmp_path, job, argv)}
    socket.send_fds(chan, [json.dumps(msg).encode()], [fd])
    os.close(fd)
    return path


def _done(chan: socket.socket) -> dict:
    assert select.select([chan], [], [], 15)[0], "the attempt did not end"
    msg, fds = receive(chan)
    assert msg is not None and msg["op"] == "done" and not fds
    return msg


def test_one_supervisor_runs_attempts_in_turn_and_exits_when_the_daemon_goes(tmp_path):
    sp = spawner.Spawner()
    try:
        with open(f"/proc/{sp.pid}/cmdline", "rb") as f:
            assert b"-S" in f.read().split(b"\0")  # not a fork of this (big) process
        chan, pid = _supervisor(sp)
        path = _send_run(chan, tmp_path, 1, ["sh", "-c", "echo one; exit 3"])
        done = _done(chan)
        assert (done["job"], done["result"]["rc"]) == (1, 3)
        info = runfile.read_run_file(path)
        assert info["sup"] == pid and info["exit"] == done["result"]
        assert not runfile.supervisor_alive(path)  # the lock went with the attempt
        assert (tmp_path / "1.out").read_text() == "one\n"
        # The next attempt: same supervisor, recycled run file, fresh content.
        spare = str(tmp_path / "spare.x")
        os.rename(path, spare)
        ino = os.stat(spare).st_ino
        path2 = _send_run(chan, tmp_path, 2, ["true"], spare)
        assert _done(chan)["result"]["rc"] == 0
        info2 = runfile.read_run_file(path2)
        assert info2["sup"] == pid and info2["exit"]["rc"] == 0
        assert os.stat(path2).st_ino == ino and not os.path.exists(spare)
        pidfd = os.pidfd_open(pid)
        chan.close()  # the daemon goes: the idle supervisor exits
        assert select.select([pidfd], [], [], 15)[0], "the idle supervisor did not exit"
        os.close(pidfd)
    finally:
        sp.close()


def test_an_order_for_an_ended_attempt_never_reaches_the_next(tmp_path):
    sp = spawner.Spawner()
    try:
        chan, _pid = _supervisor(sp)
        _send_run(chan, tmp_path, 1, ["true"])
        _done(chan)
        # A late cancel of job 1, then job 2: job 2 must run to its end.
        chan.send(json.dumps({"op": "term", "job": 1, "attempt": 1}).encode())
        _send_run(chan, tmp_path, 2, ["sh", "-c", "sleep 0.2; echo survived"])
        done = _done(chan)
        assert done["job"] == 2 and done["result"]["rc"] == 0
        assert done["result"]["cancelled"] is False
        assert (tmp_path / "2.out").read_text() == "survived\n"
        # An order naming the running attempt does reach it.
        _send_run(chan, tmp_path, 3, ["sleep", "30"])
        path3 = str(tmp_path / "3.1")
        wait_until(lambda: "job" in runfile.read_run_file(path3), message="job 3 started")
        chan.send(json.dumps({"op": "term", "job": 3, "attempt": 1}).encode())
        done = _done(chan)
        assert done["job"] == 3 and done["result"]["cancelled"] is True
        assert done["result"]["signal"] == 15
    finally:
        sp.close()


def test_falls_back_to_a_fork_when_the_fresh_one_does_not_start(tmp_path, monkeypatch):
    monkeypatch.setattr(spawner, "_start_fresh", lambda child: subprocess.Popen(["true"]).pid)
    sp = spawner.Spawner()
    try:
        chan, _pid = _supervisor(sp)
        _send_run(chan, tmp_path, 1, ["true"])
        assert _done(chan)["result"]["rc"] == 0
    finally:
        sp.close()
