"""The GPU Job Scheduler's screen sessions: `berth queue --pty` lists the jobs with a terminal, and
`berth attach` shows a job's screen as it is (a prompt printed before anyone attached is
there), not only what it prints next; detaching and attaching again shows it again (issue
12.7). Driven through a real pseudo-terminal, as a user's terminal would."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

from helpers import wait_until

JOB = 'read -p "Your name? " n; echo "hello $n"; read -p "Again? " m; echo "bye $m"'


class Terminal:
    """`berth attach ID` on a pseudo-terminal of its own."""

    def __init__(self, env: dict[str, str], job_id: int) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "berth.cli.main", "attach", str(job_id)],
            stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True,
        )  # fmt: skip
        os.close(slave)
        self.seen = b""

    def expect(self, text: bytes, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"{text!r} not on the screen: {self.seen!r}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    self.seen += os.read(self.master, 4096)
                except OSError:  # the attach has ended
                    assert text in self.seen, f"{text!r} not on the screen: {self.seen!r}"

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def close(self) -> int:
        code = self.proc.wait(timeout=10)
        os.close(self.master)
        return code


def test_attach_shows_the_screen_as_it_is_then_live(daemon):
    daemon.start(gpus=1)
    r = daemon.berth("submit", "--pty", "--parsable", "--", "bash", "-c", JOB)
    job_id = int(r.stdout)
    log = daemon.job(job_id)["stdout"]
    wait_until(lambda: os.path.exists(log) and "Your name? " in open(log).read(), timeout=20,
               message="the job prompts")  # fmt: skip
    listed = daemon.berth("queue", "--pty")
    assert f"{job_id} bash" in listed.stdout and f"berth attach {job_id}" in listed.stdout
    term = Terminal(daemon.env, job_id)
    term.expect(b"Your name? ")  # printed before we attached: replayed
    term.type(b"bob\r")
    term.expect(b"hello bob")
    term.expect(b"Again? ")
    term.type(b"\x1d")  # Ctrl-]: detach; the job goes on waiting
    term.expect(b"[detached from job")
    assert term.close() == 0
    assert daemon.job(job_id)["state"] == "RUNNING"
    again = Terminal(daemon.env, job_id)
    again.expect(b"Again? ")  # the screen as it is now
    assert b"hello bob" in again.seen
    again.type(b"x\r")
    try:
        again.expect(b"bye x")
    except AssertionError as e:  # the relay lost it, or the job never wrote it: which?
        raise AssertionError(f"{e}\n{_how_it_ended(daemon, job_id, log)}") from e
    assert again.close() == 0
    assert daemon.wait_done([job_id])[job_id]["state"] == "COMPLETED"
    done = daemon.berth("queue", "--pty")
    assert "no running job has a terminal" in done.stdout


def _how_it_ended(daemon, job_id: int, log: str) -> str:
    """The job's end and its log: the log holds the last line if only the viewer missed it."""
    try:
        daemon.wait_done([job_id], timeout=20)
    except AssertionError:
        pass  # (it has not ended: shown as it is)
    job = daemon.job(job_id)
    attempts = [(a["outcome"], a["exit_code"], a["reason"]) for a in job["attempts"]]
    with open(log, "rb") as f:
        return f"job {job_id} {job['state']} {attempts}; its log: {f.read()!r}"
