"""What a client attached to a ``--pty`` job sends to the job's relay
(:mod:`berth.daemon.supervisor.ptyrelay`), both ways of the codec: ``berth attach`` encodes, the relay
decodes.

- first, its window size: 4 bytes (:data:`WINSIZE`), rows and cols as two unsigned shorts in
  native order;
- then the bytes its user types, in which ``0xFF`` (:data:`IAC`, as in telnet) starts a
  command: ``IAC IAC`` is one data byte ``0xFF``; ``IAC 'W'`` followed by 4 bytes (rows, cols,
  as in the greeting) is a new window size (:data:`RESIZE`); any other byte after ``IAC`` is
  a protocol error. Commands may be split across reads.
"""

from __future__ import annotations

import struct

IAC = b"\xff"
RESIZE = IAC + b"W"
WINSIZE = struct.Struct("HH")  # rows, cols: the greeting, and the body of RESIZE


def encode_input(data: bytes) -> bytes:
    """What a client sends for ``data`` typed by its user (``0xFF`` doubled)."""
    return data.replace(IAC, IAC + IAC)


def encode_resize(rows: int, cols: int) -> bytes:
    """What a client sends when its window becomes ``rows`` x ``cols``."""
    return RESIZE + WINSIZE.pack(rows, cols)


def decode(buf: bytes) -> tuple[bytes, tuple[int, int] | None, bytes]:
    """Split what a client sent after its greeting into (the bytes for the job, the last
    window size asked for or None, an unfinished command to prepend to the next read).

    Raises ValueError on an unknown command."""
    out: list[bytes] = []
    size = None
    i, n = 0, len(buf)
    while i < n:
        j = buf.find(IAC, i)
        if j < 0:
            out.append(buf[i:])
            i = n
            break
        out.append(buf[i:j])
        if j + 1 == n:
            i = j
            break
        cmd = buf[j + 1]
        if cmd == IAC[0]:
            out.append(IAC)
            i = j + 2
        elif cmd == RESIZE[1]:
            if j + len(RESIZE) + WINSIZE.size > n:
                i = j
                break
            rows, cols = WINSIZE.unpack_from(buf, j + len(RESIZE))
            size = (rows, cols)
            i = j + len(RESIZE) + WINSIZE.size
        else:
            raise ValueError(f"unknown command byte {cmd:#04x} after IAC")
    return b"".join(out), size, buf[i:]
