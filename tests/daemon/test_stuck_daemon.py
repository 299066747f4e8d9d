"""A daemon that accepts a connection and never answers (stopped with SIGSTOP, wedged, or a
process squatting on its socket) never hangs a user's command (docs/daemon.md, "A daemon that
does not answer"): a request that answers at once gives up after BERTH_ANSWER_TIMEOUT seconds
(default 60), or as soon as the daemon is seen stopped, with one line naming the socket, how
long it waited and what to do; `berth status` still shows the GPUs; `berth wait` waits for as
long as its job runs, but not on a stopped daemon."""

from __future__ import annotations

import os
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

STOPPED = "is stopped"


@pytest.fixture
def silent() -> Iterator[str]:
    """A socket whose server accepts every connection and never says a word (a squatter, or
    a daemon wedged with its listener alive)."""
    d = tempfile.mkdtemp(prefix="bs-", dir="/tmp")
    path = os.path.join(d, "s.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(16)
    srv.settimeout(0.1)
    held: list[socket.socket] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                held.append(srv.accept()[0])  # (kept open: the client sees no end either)
            except TimeoutError:
                continue

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield path
    finally:
        done.set()
        t.join(timeout=10)
        for s in (*held, srv):
            s.close()
        os.unlink(path)
        os.rmdir(d)


def _env(path: str, patience: str | None = "2") -> dict[str, str]:
    env = {"BERTH_SOCKET": path}
    if patience is not None:
        env["BERTH_ANSWER_TIMEOUT"] = patience
    return env


@pytest.mark.parametrize("args", [("queue",), ("queue", "--json"), ("show", "1"),
                                  ("cancel", "1"), ("hold", "1"), ("logs", "1")])  # fmt: skip
def test_a_silent_daemon_gets_one_clear_line_not_a_hang(fake_gpus: Any, silent: str,
                                                        args: tuple[str, ...]) -> None:  # fmt: skip
    # Before: queue, show, cancel and logs waited for ever (the test's 30 s ran out), hold
    # said "did not answer in time" after 30 s without saying where or what to do.
    started = time.monotonic()
    r = fake_gpus.berth(*args, env=_env(silent), timeout=30)
    took = time.monotonic() - started
    assert r.returncode == 5, (r.returncode, r.stdout, r.stderr)
    err = r.stderr.strip()
    assert "\n" not in err, err  # one line
    assert silent in err and "did not answer in 2 s" in err, err
    assert f"pid {os.getpid()}" in err, err  # the process serving it (SO_PEERCRED)
    assert STOPPED not in err and "BERTH_ANSWER_TIMEOUT" in err, err
    assert took < 20, took


def test_a_submit_that_timed_out_says_it_may_have_been_queued(fake_gpus: Any, silent: str) -> None:
    r = fake_gpus.berth("submit", "--", "true", env=_env(silent), timeout=30)
    assert r.returncode == 5, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""  # no job id: none was given
    err = r.stderr.strip()
    assert silent in err and "may have been queued" in err, err
    assert "`berth queue`" in err and "--unique" in err, err


def test_status_shows_the_gpus_and_says_it_could_not_ask_the_daemon(
    fake_gpus: Any, silent: str
) -> None:
    fake_gpus.setup(n=2)
    r = fake_gpus.berth("status", env=_env(silent, None), timeout=30)
    assert r.returncode == 0, r.stderr
    assert "GPU" in r.stdout, r.stdout  # the table, as without a daemon
    assert f"queue: could not ask the daemon on {silent}" in r.stdout, r.stdout


def test_a_stopped_daemon_is_named_at_once_and_wait_does_not_wait_on_it(daemon: Any) -> None:
    daemon.start(gpus=1)
    job = daemon.submit("sleep", "600")
    assert daemon.proc is not None
    pid = daemon.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        for args in (("queue",), ("wait", str(job))):
            started = time.monotonic()
            # (no BERTH_ANSWER_TIMEOUT: the default's 60 s is not waited out on a stopped daemon)
            r = daemon.berth(*args, timeout=40)
            took = time.monotonic() - started
            assert r.returncode == 5, (args, r.returncode, r.stdout, r.stderr)
            err = r.stderr.strip()
            assert f"the daemon (pid {pid}) {STOPPED}" in err, err
            assert f"kill -CONT {pid}" in err and daemon.socket in err, err
            assert took < 30, (args, took)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert daemon.call("cancel", job_ids=[job])["cancelled"]


def test_wait_is_not_bounded_while_its_job_runs(daemon: Any) -> None:
    # A long wait by design: the bound is for answers due at once, not for `berth wait`.
    daemon.start(gpus=1)
    flag = os.path.join(str(daemon.fake.root), "go")
    job = daemon.submit("sh", "-c", f"while [ ! -e {flag} ]; do sleep 0.05; done")
    env = {**daemon.env, "BERTH_ANSWER_TIMEOUT": "1"}
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "berth.cli.main", "wait", str(job)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        time.sleep(3)  # (longer than the bound: the wait must outlive it)
        assert proc.poll() is None, proc.communicate()
        open(flag, "w").close()
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, (out, err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("value", ["abc", "0", "-5", "inf", "nan"])
def test_a_bad_answer_timeout_is_named_and_nothing_is_asked(fake_gpus: Any, silent: str,
                                                           value: str) -> None:  # fmt: skip
    fake_gpus.setup(n=1)
    for args in (("queue",), ("submit", "--", "true"), ("status",)):
        r = fake_gpus.berth(*args, env=_env(silent, value), timeout=30)
        assert r.returncode == 2, (args, r.returncode, r.stdout, r.stderr)
        assert f"BERTH_ANSWER_TIMEOUT={value!r}" in r.stderr, r.stderr
