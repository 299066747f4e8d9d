"""`berth run` at an interactive shell (a pseudo-terminal): Ctrl-C reaches the command,
Ctrl-Z stops the job and `fg` resumes it, and the command can read the terminal."""

from __future__ import annotations

import os
import pty
import select
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import wait_until


class Shell:
    def __init__(self, env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # child: an interactive bash with job control
            os.execve(
                shutil.which("bash") or "/bin/bash", ["bash", "--norc", "--noprofile", "-i"], env
            )
        self.out = ""
        self.mark = 0

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def read(self) -> str:
        while select.select([self.fd], [], [], 0.01)[0]:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                break
            if not data:
                break
            self.out += data.decode(errors="replace")
        return self.out

    def expect(self, text: str, timeout: float = 15) -> None:
        """Wait until ``text`` appears after what was last expected."""
        try:
            wait_until(lambda: text in self.read()[self.mark :], timeout=timeout)
        except AssertionError:
            raise AssertionError(
                f"{text!r} never appeared; the terminal shows {self.out!r}"
            ) from None
        self.mark = self.out.index(text, self.mark) + len(text)

    def close(self) -> None:
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        os.close(self.fd)


@pytest.fixture
def shell(fake_gpus: Any) -> Iterator[Shell]:
    fake_gpus.setup(n=1)
    env = {**fake_gpus.env, "PS1": "PROMPT$ ", "TERM": "dumb"}
    sh = Shell(env)
    sh.expect("PROMPT$ ")
    yield sh
    sh.close()


BERTH = f"{sys.executable} -m berth.cli.main run --"


def test_ctrl_c_reaches_the_command(shell: Shell) -> None:
    shell.send(f'{BERTH} sh -c \'echo st""arted; sleep 30; echo not-reached\'; echo r""c=$?\n')
    shell.expect("started")
    shell.send("\x03")
    shell.expect("rc=130")
    assert "not-reached\r" not in shell.read()


def test_ctrl_z_stops_and_fg_resumes(shell: Shell) -> None:
    shell.send(f"{BERTH} sh -c 'echo st\"\"arted; read line; echo got-$line; exit 3'\n")
    shell.expect("started")
    shell.send("\x1a")
    shell.expect("Stopped")
    shell.expect("PROMPT$ ")  # the shell has the terminal back
    shell.send("fg\n")
    shell.send("hello\n")  # read by the command: it owns the terminal again
    shell.expect("got-hello")
    shell.expect("PROMPT$ ")
    shell.send('echo r""c=$?\n')
    shell.expect("rc=3")
