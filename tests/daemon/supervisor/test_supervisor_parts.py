"""The supervisor's lean stand-ins for library calls give the library's answers."""

from __future__ import annotations

import json
import os
import shutil
import stat

from berth.claims import ledger
from berth.daemon.supervisor import attempt, serve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


def test_which_matches_shutil_which(tmp_path: Path) -> None:
    base = str(tmp_path)
    for d in ("a", "b", "c"):
        os.mkdir(os.path.join(base, d))
    tool = os.path.join(base, "b", "tool")
    with open(tool, "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(tool, stat.S_IRWXU)
    plain = os.path.join(base, "a", "tool")  # not executable: skipped
    with open(plain, "w") as f:
        f.write("x")
    os.chmod(plain, stat.S_IRUSR)
    os.mkdir(os.path.join(base, "c", "tool"))  # a directory: skipped
    paths = [
        f"{base}/a:{base}/c:{base}/b",
        f"{base}/a/:{base}/b/",
        f"{base}/c:{base}/a",
        "",
        ":/usr/bin:/bin",
        "/usr/bin:/usr/bin",
    ]
    for path in paths:
        for exe in ("tool", "true", "no-such-command-here"):
            assert attempt.which(exe, path) == shutil.which(exe, path=path), (exe, path)


def test_encode_is_json() -> None:
    results = [
        {"rc": 0, "signal": None, "timeout": False, "cancelled": False, "start": 1.5,
         "end": 1763800000.123456, "error": None},
        {"rc": 137, "signal": 9, "timeout": True, "cancelled": True, "start": 2.0,
         "end": 3.25, "error": "command not found: 'x\u00e9\"\\n' (in the job's PATH)\n"},
        {"rc": None, "signal": None, "end": float("inf"), "x": [1, 2]},
    ]  # fmt: skip
    for result in results:
        assert serve.encode(result) == json.dumps(result).encode()


def test_own_command_line_is_read_once_per_process() -> None:
    with open("/proc/self/cmdline", "rb") as f:
        argv = f.read().rstrip(b"\0").split(b"\0")
    expected = " ".join(a.decode("utf-8", "replace") for a in argv)[:500]
    assert ledger.command_line() == expected
    assert ledger.command_line() == expected
    assert ledger.command_line(os.getpid()) == expected


def test_receive_reuses_its_buffer_without_mixing_messages() -> None:
    """A supervisor receives every message into one mapping: each message comes back whole
    and alone (a long one, then a short one: nothing of the long one's tail), with its
    descriptors, and the end of the channel reads as (None, [])."""
    import socket

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    long = {"op": "run", "spec": {"argv": ["x" * 100_000]}}
    r, w = os.pipe()
    try:
        socket.send_fds(ours, [json.dumps(long).encode()], [r])
        ours.send(b'{"op": "term"}')
        msg, fds = attempt.receive(theirs)
        assert msg == long and len(fds) == 1
        os.write(w, b"y")
        assert os.read(fds[0], 1) == b"y"  # the descriptor that was sent
        os.close(fds[0])
        assert attempt.receive(theirs) == ({"op": "term"}, [])
        ours.close()
        assert attempt.receive(theirs) == (None, [])
    finally:
        os.close(r)
        os.close(w)
        theirs.close()
