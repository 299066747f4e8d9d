"""The daemon stops (SIGTERM) while clients wait on it (`berth wait`, `berth logs -f`): the
requests in hand are cancelled and the connections closed before its store closes, so its
log has no traceback (issue 22.2: an unhandled CancelledError, and `wait` requests run on
over the closed store), and the clients end."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import wait_until


def test_stopping_with_clients_attached_logs_no_traceback(daemon, tmp_path):
    daemon.start()
    job = daemon.submit("sh", "-c", "echo ready; exec sleep 300")
    followed = tmp_path / "followed.txt"
    with open(followed, "w") as out:
        clients = [
            subprocess.Popen([sys.executable, "-m", "berth.cli.main", *args],
                             env=daemon.env, stdout=out, stderr=out)
            for args in (["wait", str(job)], ["logs", "-f", str(job)])
        ]
    wait_until(lambda: "ready" in followed.read_text(), timeout=30, message="logs -f follows")
    before = os.path.getsize(daemon.log)
    daemon.stop()
    for c in clients:
        c.wait(timeout=30)
    with open(daemon.log) as f:
        f.seek(before)
        said = f.read()
    assert "stopping; 1 running job(s) stay under their supervisors" in said, said
    assert "Traceback" not in said and "CancelledError" not in said, said
