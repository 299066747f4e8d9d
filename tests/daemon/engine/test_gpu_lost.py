"""The daemon says when a GPU is lost and when it comes back (issue 40.7): one line each way in
its log, and an entry each way in the audit log `berth admin log` shows; before, it said
nothing, and a GPU gone from the queue's view was a mystery."""

from __future__ import annotations

from typing import Any

from helpers import wait_until


def _admin_log(daemon: Any) -> str:
    r = daemon.berth("admin", "log")
    assert r.returncode == 0, r.stderr
    return str(r.stdout)


def _daemon_log(daemon: Any) -> str:
    with open(daemon.log) as f:
        return f.read()


def test_a_lost_gpu_and_its_return_are_logged_and_in_admin_log(daemon: Any) -> None:
    daemon.start("--poll-interval", "0.2")
    assert "lost gpu" not in _admin_log(daemon)
    uuid = daemon.fake.uuids[3]
    daemon.fake.inject(3, "*", "GPU_IS_LOST")
    wait_until(lambda: f"GPU 3 ({uuid}) lost" in _daemon_log(daemon), timeout=15,
               message="the daemon to log GPU 3 lost")  # fmt: skip
    shown = wait_until(lambda: "lost gpu  GPU 3" in (t := _admin_log(daemon)) and t,
                       timeout=10, message="berth admin log to show GPU 3 lost")  # fmt: skip
    assert "None" not in shown, shown  # (no user, no pid: not "None")
    daemon.fake.inject(3, "*", None)
    wait_until(lambda: f"GPU 3 ({uuid}) back" in _daemon_log(daemon), timeout=15,
               message="the daemon to log GPU 3 back")  # fmt: skip
    shown = _admin_log(daemon)
    assert "back gpu  GPU 3" in shown and shown.index("lost gpu") < shown.index("back gpu")
    # one line each way, though it polled many times
    log = _daemon_log(daemon)
    assert log.count(f"GPU 3 ({uuid}) lost") == 1 and log.count(f"GPU 3 ({uuid}) back") == 1
    assert shown.count("GPU 3") == 2, shown
