"""The supervisor fork server: a fresh small interpreter (or, failing that, a fork)."""

from __future__ import annotations

import os
import select
import subprocess

from berth.daemon import spawner, supervisor


def _run_one(sp: spawner.Spawner, tmp_path, job: int, spare: str | None = None) -> dict:
    spec = {
        "uid": None, "gid": None, "user": None, "argv": ["true"],
        "env": {"PATH": os.environ["PATH"]}, "cwd": str(tmp_path),
        "stdout": str(tmp_path / f"{job}.out"), "stderr": str(tmp_path / f"{job}.err"),
        "time_limit": None, "kill_after": 5, "pty": False,
    }  # fmt: skip
    path = str(tmp_path / f"{job}.1")
    sp.request(job, 1, path, spec, [], spare)
    assert select.select([sp.sock], [], [], 15)[0], "no reply from the fork server"
    [(msg, pidfd)] = sp.replies()
    assert msg["job"] == job and pidfd is not None
    assert select.select([pidfd], [], [], 15)[0], "the supervisor did not end"
    os.close(pidfd)
    return supervisor.read_run_file(path)


def test_a_fresh_interpreter_forks_supervisors_and_reuses_a_spare(tmp_path):
    sp = spawner.Spawner()
    try:
        with open(f"/proc/{sp.pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        assert b"-S" in argv  # not a fork of this (big) process
        first = _run_one(sp, tmp_path, 1)
        assert first["exit"]["rc"] == 0
        spare = str(tmp_path / "spare.x")
        os.rename(tmp_path / "1.1", spare)
        ino = os.stat(spare).st_ino
        second = _run_one(sp, tmp_path, 2, spare)
        assert second["exit"]["rc"] == 0 and second["sup"] != first["sup"]
        assert os.stat(tmp_path / "2.1").st_ino == ino and not os.path.exists(spare)
    finally:
        sp.close()


def test_falls_back_to_a_fork_when_the_fresh_one_does_not_start(tmp_path, monkeypatch):
    monkeypatch.setattr(spawner, "_start_fresh", lambda child: subprocess.Popen(["true"]).pid)
    sp = spawner.Spawner()
    try:
        assert _run_one(sp, tmp_path, 1)["exit"]["rc"] == 0
    finally:
        sp.close()
