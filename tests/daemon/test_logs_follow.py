"""`berth logs -f` follows by inotify (issue 40.2): a line shows as soon as the job writes it,
and while the job writes nothing the follower sleeps (it polled ten times a second). Its
latency is measured by bench/logs_follow.py."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import threading
import time

from helpers import wait_until

SCRIPT = ("echo first; while [ ! -e {d}/T1 ]; do sleep 0.02; done; echo second; "
          "while [ ! -e {d}/T2 ]; do sleep 0.02; done; echo third")  # fmt: skip


def _wakeups(pid: int) -> int:
    """How often the process (all its threads) has slept and woken (voluntary switches)."""
    total = 0
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        with open(status) as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
    return total


def test_logs_f_shows_each_line_and_sleeps_while_nothing_is_written(daemon):
    daemon.start(gpus=1)
    d = str(daemon.fake.root)
    job = daemon.submit("sh", "-c", SCRIPT.format(d=d))
    proc = subprocess.Popen([sys.executable, "-m", "berth.cli.main", "logs", "-f", str(job)],
                            env=daemon.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    out: list[bytes] = []
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: out.extend(iter(proc.stdout.readline, b"")))  # type: ignore[union-attr]
    reader.start()
    try:
        wait_until(lambda: b"first\n" in out, timeout=30, message="the first line")
        # Nothing is written now: the follower sleeps. Polling (every 0.1 s, a daemon round trip
        # each) woke it 10+ times a second; inotify and the daemon's one wait for the end, ~0.
        before = _wakeups(proc.pid)
        time.sleep(1.0)  # (a window to count in, not a wait for a condition)
        idle = _wakeups(proc.pid) - before
        assert idle < 5, f"woke {idle} times in 1 s with nothing to read"
        open(os.path.join(d, "T1"), "w").close()
        wait_until(lambda: b"second\n" in out, timeout=30, message="the second line")
        open(os.path.join(d, "T2"), "w").close()
        assert proc.wait(timeout=30) == 0
        reader.join(timeout=10)
        assert out == [b"first\n", b"second\n", b"third\n"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
