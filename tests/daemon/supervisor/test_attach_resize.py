"""Window sizes reach a ``--pty`` job while attached: the relay's client protocol (greeting,
then bytes where 0xFF starts a command), driven in-process byte by byte, and end to end
through a real daemon, with a test client and with the real ``berth attach`` under a pty."""

from __future__ import annotations

import fcntl
import os
import select
import socket
import struct
import subprocess
import sys
import termios
import time
import tty
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import wait_until

from berth.daemon.supervisor.ptyrelay import MAX_PENDING, PtyRelay
from berth.wire.ptyframes import WINSIZE, decode, encode_input, encode_resize

# --- the decoder ------------------------------------------------------------------------


def _feed(chunks: list[bytes]) -> tuple[bytes, list[tuple[int, int]]]:
    data, sizes, tail = b"", [], b""
    for chunk in chunks:
        out, size, tail = decode(tail + chunk)
        data += out
        if size is not None:
            sizes.append(size)
    assert tail == b""
    return data, sizes


def test_decoder_keeps_data_and_sizes_apart_however_the_stream_is_split():
    typed = b"ls\r\xff\xfe caf\xc3\xa9 \xff"
    stream = (
        encode_input(typed[:5])
        + encode_resize(40, 100)
        + encode_input(typed[5:])
        + encode_resize(0xFFFF, 0xFF)
    )
    assert _feed([stream]) == (typed, [(0xFFFF, 0xFF)])  # one read: its last size counts
    for cut in range(len(stream) + 1):
        data, sizes = _feed([stream[:cut], stream[cut:]])
        assert data == typed and sizes[-1] == (0xFFFF, 0xFF), cut
    data, sizes = _feed([bytes([b]) for b in stream])
    assert data == typed and sizes == [(40, 100), (0xFFFF, 0xFF)]


def test_decoder_refuses_unknown_commands():
    for bad in (b"\xff\x00", b"abc\xffX1234", b"\xffw\x01\x02\x03\x04"):
        with pytest.raises(ValueError):
            decode(bad)


# --- the relay, in-process ----------------------------------------------------------------


class Rig:
    """A PtyRelay over a real pty (slave raw), its poll loop turned by hand."""

    def __init__(self, tmp: str) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        self.log = os.open(os.path.join(tmp, "log"), os.O_WRONLY | os.O_CREAT, 0o600)
        self.relay = PtyRelay(self.master, self.log, os.path.join(tmp, "t.pty"))
        self.poller = select.poll()
        self.relay.register(self.poller)

    def turn(self) -> None:
        """Handle every event ready now (a UNIX socket's bytes are there once sent)."""
        while events := self.poller.poll(0):
            for fd, _ in events:
                assert self.relay.handle(self.poller, fd)

    def connect(self, greeting: bytes = WINSIZE.pack(24, 80)) -> socket.socket:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.relay.path)
        conn.sendall(greeting)
        self.turn()
        return conn

    def size(self) -> tuple[int, int]:
        rows, cols, _, _ = struct.unpack(
            "HHHH", fcntl.ioctl(self.slave, termios.TIOCGWINSZ, bytes(8))
        )
        return rows, cols

    def typed(self, n: int) -> bytes:
        """The next ``n`` bytes the job reads (the pty hands them over asynchronously)."""
        got = b""
        while len(got) < n:
            assert select.select([self.slave], [], [], 10)[0], f"only {got!r} arrived"
            got += os.read(self.slave, n - len(got))
        return got

    def close(self) -> None:
        self.relay.close()
        for fd in (self.master, self.slave, self.log):
            os.close(fd)


@pytest.fixture
def rig(tmp_path: Any) -> Iterator[Rig]:
    r = Rig(str(tmp_path))
    try:
        yield r
    finally:
        r.close()


def test_relay_applies_sizes_and_input_sent_a_byte_at_a_time(rig):
    conn = rig.connect(b"")
    typed = encode_input(b"a\xffb")
    stream = WINSIZE.pack(33, 111) + typed + encode_resize(40, 100) + encode_input(b"\xff\xff")
    expect = {2: (0, 0), 3: (33, 111), 3 + len(typed) + 5: (33, 111), 4 + len(typed) + 5: (40, 100)}
    for i, byte in enumerate(stream):
        conn.send(bytes([byte]))
        rig.turn()
        if i in expect:
            assert rig.size() == expect[i], i
    assert rig.typed(5) == b"a\xffb\xff\xff"
    assert len(rig.relay.clients) == 1  # still attached


def test_relay_drops_a_client_that_breaks_the_protocol_and_serves_the_others(rig):
    good = rig.connect(WINSIZE.pack(30, 90))
    bad = rig.connect(WINSIZE.pack(20, 70) + b"hi\xff\x00more")
    assert len(rig.relay.clients) == 1
    bad.settimeout(5)
    assert bad.recv(100) == b""  # the relay hung up on it
    good.sendall(encode_resize(50, 120) + b"ok")
    rig.turn()
    assert rig.size() == (50, 120)  # the last size sent wins
    assert rig.typed(2) == b"ok"
    os.write(rig.slave, b"out")
    wait_until(lambda: rig.turn() or select.select([good], [], [], 0)[0], timeout=10)
    assert good.recv(100) == b"out"


def test_relay_keeps_bounded_input_the_job_does_not_read(rig):
    conn = rig.connect()
    conn.setblocking(False)
    payload = bytes(range(255)) * 1024  # 255 KiB without 0xFF: far more than the pty takes
    sent = 0
    while sent < len(payload):
        try:
            sent += conn.send(payload[sent : sent + 65536])
        except BlockingIOError:
            pass
        rig.turn()  # returns: a full pty does not make the relay spin on POLLOUT
    assert 0 < len(rig.relay.pending) <= MAX_PENDING
    got = bytearray()

    def drained() -> bool:
        while select.select([rig.slave], [], [], 0)[0]:
            got.extend(os.read(rig.slave, 65536))
        rig.turn()
        return not rig.relay.pending

    wait_until(drained, timeout=10, message="the relay hands its pending input over")
    assert got[:4096] == payload[:4096] and len(got) > MAX_PENDING // 2
    assert rig.poller.poll(0) == []  # back to waiting for output only


# --- end to end, through a real daemon ---------------------------------------------------

# Appends "ready", then "winch ROWSxCOLS" on every SIGWINCH, to the report file (os.write on
# an O_APPEND file: safe in a signal handler); ends when it reads the line "quit".
JOB = """\
import os, signal, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
def winch(signum, frame):
    cols, rows = os.get_terminal_size(0)
    os.write(fd, f"winch {rows}x{cols}\\n".encode())
signal.signal(signal.SIGWINCH, winch)
os.write(fd, b"ready\\n")
for line in sys.stdin:
    if line.strip() == "quit":
        break
os.write(fd, b"bye\\n")
"""


def _start_job(daemon: Any) -> tuple[int, str, str]:
    """A running --pty job with its SIGWINCH handler in place: (id, attach path, report)."""
    daemon.start()
    root = str(daemon.fake.root)
    script, report = os.path.join(root, "winch.py"), os.path.join(root, "winch.log")
    with open(script, "w") as f:
        f.write(JOB)
    job_id = daemon.submit(sys.executable, script, report, pty=True)
    wait_until(lambda: _seen(report, "ready"), timeout=15, message="the job is ready")
    return job_id, daemon.job(job_id)["attach"], report


def _seen(report: str, line: str) -> bool:
    try:
        with open(report) as f:
            return line in f.read().splitlines()
    except FileNotFoundError:
        return False


def _attach(path: str, rows: int, cols: int) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    conn.sendall(WINSIZE.pack(rows, cols))
    return conn


def _hung_up(conn: socket.socket) -> bool:
    """True once the relay has closed ``conn`` (its output read and thrown away)."""
    try:
        while data := conn.recv(65536, socket.MSG_DONTWAIT):
            pass
        return not data
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def test_resizes_reach_the_job_while_attached_and_the_last_one_wins(daemon):
    job_id, path, report = _start_job(daemon)
    first = _attach(path, 30, 90)
    wait_until(lambda: _seen(report, "winch 30x90"), timeout=15, message="greeting size")
    first.sendall(encode_resize(40, 100))
    wait_until(lambda: _seen(report, "winch 40x100"), timeout=15, message="resize")
    second = _attach(path, 50, 120)
    wait_until(lambda: _seen(report, "winch 50x120"), timeout=15, message="second client")
    first.sendall(encode_input(b"still typing") + encode_resize(41, 101) + b"\r")
    wait_until(lambda: _seen(report, "winch 41x101"), timeout=15, message="last one wins")
    second.sendall(b"quit\r")
    assert daemon.wait_done([job_id])[job_id]["state"] == "COMPLETED"
    assert _seen(report, "bye")
    first.close()
    second.close()


def test_a_client_speaking_garbage_is_dropped_and_the_job_ends_normally(daemon):
    job_id, path, report = _start_job(daemon)
    bad = _attach(path, 30, 90)
    bad.sendall(b"\xff\x00garbage\xff\xfe")
    wait_until(lambda: _hung_up(bad), timeout=15, message="the relay drops the bad client")
    bad.close()
    assert daemon.job(job_id)["state"] == "RUNNING"
    good = _attach(path, 44, 144)  # the relay still serves
    wait_until(lambda: _seen(report, "winch 44x144"), timeout=15, message="resize after")
    good.sendall(b"quit\r")
    assert daemon.wait_done([job_id])[job_id]["state"] == "COMPLETED"
    assert _seen(report, "bye")
    good.close()


def test_berth_attach_sends_the_new_size_when_its_terminal_is_resized(daemon):
    job_id, _, report = _start_job(daemon)
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 90, 0, 0))
    screen = bytearray()

    def pump_screen() -> None:  # keep the terminal's output moving
        while select.select([master], [], [], 0)[0]:
            try:
                screen.extend(os.read(master, 65536))
            except OSError:  # EIO: the client has gone
                return

    def seen(line: str) -> bool:
        pump_screen()
        return _seen(report, line)

    proc = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "attach", str(job_id)],
        stdin=slave, stdout=slave, stderr=slave, env=daemon.env, start_new_session=True,
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
    )  # fmt: skip
    os.close(slave)
    try:
        wait_until(lambda: seen("winch 30x90"), timeout=15, message="attached")
        # As a terminal emulator does: the kernel sends SIGWINCH to `berth attach`.
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 45, 132, 0, 0))
        wait_until(lambda: seen("winch 45x132"), timeout=15, message="resize forwarded")
        os.write(master, b"quit\r")
        wait_until(lambda: pump_screen() or proc.poll() is not None, timeout=15)
        assert proc.returncode == 0, bytes(screen)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert daemon.wait_done([job_id])[job_id]["state"] == "COMPLETED"
    assert b"attached to job" in screen


def _spew(rig: Rig, total: int) -> bytes:
    """The job writes ``total`` bytes (a counting pattern), the relay turning meanwhile."""
    data = b"".join(b"%07d\n" % i for i in range(total // 8))
    os.set_blocking(rig.slave, False)
    sent = 0
    while sent < len(data):
        try:
            sent += os.write(rig.slave, data[sent : sent + 4096])
        except BlockingIOError:
            pass
        rig.turn()
    return data


def test_a_slow_viewer_catches_up_without_losing_output(rig):
    viewer = rig.connect()
    data = _spew(rig, 1024 * 1024)  # far more than a socket buffer, unread meanwhile
    assert len(rig.relay.clients) == 1  # kept
    viewer.setblocking(False)
    got = bytearray()
    deadline = time.monotonic() + 30
    while len(got) < len(data):
        assert time.monotonic() < deadline, f"stalled after {len(got)} bytes"
        try:
            got += viewer.recv(1 << 20)
        except BlockingIOError:
            select.select([viewer], [], [], 0.1)  # (the relay turns below)
        rig.turn()
    assert bytes(got) == data


def test_a_viewer_too_far_behind_is_dropped_and_the_job_goes_on(rig, monkeypatch):
    from berth.daemon.supervisor import ptyrelay

    monkeypatch.setattr(ptyrelay, "MAX_BEHIND", 256 * 1024)
    viewer = rig.connect()
    data = _spew(rig, 2 * 1024 * 1024)
    assert rig.relay.clients == {}
    with open(os.path.join(os.path.dirname(rig.relay.path), "log"), "rb") as f:
        assert f.read() == data  # the log has everything
    viewer.close()


def test_a_slow_viewer_gets_all_the_output_of_a_job_that_has_ended(rig):
    """The job's last output is not lost to a viewer behind when the job ends: the relay's
    close sends it what it has not taken yet while it takes it (it was sent what fit in
    its socket's buffer, then dropped)."""
    import threading

    viewer = rig.connect()
    data = _spew(rig, 1024 * 1024)  # far more than a socket buffer, unread meanwhile
    os.close(rig.slave)  # the job ends
    rig.slave = os.open(os.devnull, os.O_RDONLY)  # (for the fixture's close)
    closing = threading.Thread(target=rig.relay.close)
    closing.start()
    got = bytearray()
    viewer.settimeout(30)
    while chunk := viewer.recv(1 << 20):
        got += chunk
    closing.join(30)
    assert not closing.is_alive()
    assert len(got) == len(data) and bytes(got) == data


def test_a_viewer_that_takes_nothing_holds_the_end_of_a_job_a_moment_at_most(rig):
    viewer = rig.connect()
    _spew(rig, 1024 * 1024)
    os.close(rig.slave)  # the job ends; its viewer never reads again
    rig.slave = os.open(os.devnull, os.O_RDONLY)
    began = time.monotonic()
    rig.relay.close()
    assert time.monotonic() - began < 5
    assert rig.relay.clients == {}
    viewer.close()
