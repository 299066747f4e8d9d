"""A connection's bytes, read in chunks (:class:`Frames`): a client that pipelines its
requests sends many frames per socket read, and only a read that has to wait for the network
pays for a timeout (``asyncio.wait_for`` makes a task per call: taking each frame's header and
payload by ``readexactly`` under ``wait_for`` cost a submit more than its checks, issue 21).

What it holds ahead of the frame being read is bounded (:data:`CHUNK`), so the bounds of
:mod:`berth.daemon.requests.server` hold: a connection that stops being read (its requests in
hand at the limit) holds at most that much of what its client sent next.
"""

from __future__ import annotations

import asyncio

CHUNK = 64 * 1024  # bytes asked of the socket per read (at least what the frame lacks)


class Frames:
    """The bytes of one connection's stream: :meth:`fill` waits (within a time, or without
    one) until so many are in hand, :meth:`take` hands them out. The end of the stream raises
    :class:`asyncio.IncompleteReadError`, and a time that runs out
    :class:`asyncio.TimeoutError`, as ``readexactly`` under ``wait_for`` did."""

    __slots__ = ("_buf", "_pos", "_reader")

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._buf = bytearray()
        self._pos = 0  # where the bytes not taken yet begin in _buf

    def __len__(self) -> int:
        return len(self._buf) - self._pos

    async def fill(self, n: int, timeout: float | None) -> None:
        """Until ``n`` bytes are in hand; ``timeout``: seconds for all of them to come (None:
        as long as it takes)."""
        if len(self) >= n:
            return  # (a pipelined stream: no read, no timer)
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while len(self._buf) < n:
            read = self._reader.read(max(CHUNK, n - len(self._buf)))
            if deadline is None:
                data = await read
            else:
                data = await asyncio.wait_for(read, max(0.0, deadline - loop.time()))
            if not data:
                raise asyncio.IncompleteReadError(bytes(self._buf), n)
            self._buf += data

    def take(self, n: int) -> bytes:
        """The next ``n`` bytes (in hand: :meth:`fill` first)."""
        start = self._pos
        end = start + n
        assert end <= len(self._buf)
        with memoryview(self._buf) as view:
            out = bytes(view[start:end])
        if end == len(self._buf):
            self._buf.clear()
            self._pos = 0
        else:
            self._pos = end
        return out
