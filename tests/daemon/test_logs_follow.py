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


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


class _Follower:
    """`berth logs -f JOB` in a subprocess, its stdout lines collected by a thread."""

    def __init__(self, daemon, job: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "berth.cli.main", "logs", "-f", str(job)],
            env=daemon.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.out: list[bytes] = []
        stdout = self.proc.stdout
        assert stdout is not None
        self.reader = threading.Thread(target=lambda: self.out.extend(iter(stdout.readline, b"")))
        self.reader.start()

    def shows(self, line: bytes) -> None:
        wait_until(lambda: line in self.out, timeout=30, message=f"the line {line!r}")

    def sleeps(self) -> None:
        """Nothing to read: it sleeps (a poll every 0.1 s woke it 10+ times a second). Counted
        once it waits: its inotify descriptor made, and 0.3 s without a wake-up (never, for
        a poll)."""
        pid = self.proc.pid

        def waiting() -> bool:
            fds = glob.glob(f"/proc/{pid}/fd/*")
            if not any(_link(fd) == "anon_inode:inotify" for fd in fds):
                return False
            before = _wakeups(pid)
            time.sleep(0.3)  # (a window to count in)
            return _wakeups(pid) == before

        wait_until(waiting, timeout=30, message="the follower to wait without waking")
        before = _wakeups(self.proc.pid)
        time.sleep(1.0)  # (a window to count in, not a wait for a condition)
        idle = _wakeups(self.proc.pid) - before
        assert idle < 5, f"woke {idle} times in 1 s with nothing to read"

    def end(self) -> list[bytes]:
        assert self.proc.wait(timeout=30) == 0
        self.reader.join(timeout=10)
        return self.out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def test_logs_f_awaits_a_log_whose_directory_its_job_makes_without_polling(daemon):
    """`-o runs/7/out.log`: the directory is made when the job starts. The follower of the
    pending job awaits it by inotify on the nearest directory there is (it polled, 10 times a
    second, for the whole job), and shows the job's line once it starts."""
    daemon.start(gpus=1)
    d = str(daemon.fake.root)
    blocker = daemon.submit("sleep", "60")
    wait_until(lambda: daemon.call("queue", all=True)["jobs"][0]["state"] == "RUNNING",
               timeout=30, message="the blocker to run")  # fmt: skip
    log = os.path.join(d, "runs", "7", "out.log")
    job = daemon.submit("sh", "-c", f"echo first; while [ ! -e {d}/T1 ]; do sleep 0.02; done",
                        stdout=log)  # fmt: skip
    f = _Follower(daemon, job)
    try:
        f.sleeps()
        assert not os.path.exists(os.path.dirname(log)) and f.out == []
        daemon.call("cancel", job_ids=[blocker])
        f.shows(b"first\n")
        f.sleeps()  # (the log's directory watched now, its ancestor's events past)
        open(os.path.join(d, "T1"), "w").close()
        assert f.end() == [b"first\n"]
    finally:
        f.kill()


def test_logs_f_reads_a_truncated_or_rotated_log_from_its_start(daemon):
    """As `tail -F`: a log emptied under the follower (`: > out.log`, logrotate's
    copytruncate) shows what is written after from its first byte (it read on from the old
    offset: "second" came out as its last byte); one replaced by a new file (rotated) is read
    to its end (the line written just before the new file came was lost), then the new one
    from its start."""
    daemon.start(gpus=1)
    d = str(daemon.fake.root)
    log = os.path.join(d, "out.log")
    script = (f"echo first-line; while [ ! -e {d}/T1 ]; do sleep 0.02; done; echo second; "
              f"while [ ! -e {d}/T2 ]; do sleep 0.02; done")  # fmt: skip
    job = daemon.submit("sh", "-c", script, stdout=log)
    f = _Follower(daemon, job)
    try:
        f.shows(b"first-line\n")
        with open(log, "r+b") as out:
            out.truncate(0)  # (the job appends: its next line lands at the start)
        open(os.path.join(d, "T1"), "w").close()
        f.shows(b"second\n")
        os.rename(log, log + ".1")  # rotated: a new file in its place ...
        with open(log + ".1", "ab") as old:
            old.write(b"last of the old\n")  # (... once the old one's last line is written)
        with open(log + ".new", "wb") as new:
            new.write(b"new file\n")
        os.rename(log + ".new", log)
        f.shows(b"new file\n")
        open(os.path.join(d, "T2"), "w").close()
        assert f.end() == [b"first-line\n", b"second\n", b"last of the old\n", b"new file\n"]
    finally:
        f.kill()


class _Pending:
    """A backend whose job never ends while the test runs (Slurm's name: its follower also
    reads again every POLL_SLURM seconds, for logs on a network file system)."""

    name = "slurm"

    def __init__(self) -> None:
        self.done = threading.Event()

    def wait(self, job_id: str, timeout: float) -> None:
        self.done.wait()


def test_a_slurm_log_on_a_local_disk_shows_by_inotify_not_the_poll(tmp_path, monkeypatch):
    """Slurm's logs on this machine's disk (its own node, or `srun` here): a write wakes the
    follower by inotify, and so does the making of a directory it waits for; the poll (made
    an hour long here) is only for logs written on other nodes."""
    from berth.cli import logs_follow

    monkeypatch.setattr(logs_follow, "POLL_SLURM", 3600.0)
    log = tmp_path / "out" / "slurm-7.out"
    backend = _Pending()
    wakes = logs_follow.Wakes(backend, "7", [str(log)])  # type: ignore[arg-type]
    try:
        assert wakes.fd is not None and wakes.missing == [str(log.parent)]
        done = threading.Event()

        def waiter() -> None:
            while not log.exists() or not log.read_bytes():
                wakes.wait()
            done.set()

        threading.Thread(target=waiter, daemon=True).start()
        log.parent.mkdir()
        wait_until(lambda: not wakes.missing, timeout=30, message="the directory watched")
        log.write_bytes(b"hi\n")
        assert done.wait(30), "the write did not wake the follower"
    finally:
        backend.done.set()
        wakes.close()
