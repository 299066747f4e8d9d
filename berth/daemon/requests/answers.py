"""One connection's answers, in the order of its requests (:class:`Answers`): what the reader
puts in (an answer made, or a handler's future of one) and the writer takes out.

The answers that are ready together go out in one write and one ``drain`` (issue 35): a burst
of pipelined submits is answered by one commit, and each answer written alone cost the daemon
a ``send`` system call, a ``drain`` and a turn of its writer. An answer that is not ready ends
the batch (the ones before it are written first: none waits behind a slower one), and an
answer in several frames (a :class:`~berth.daemon.requests.stream.Stream`) is written alone,
frame by frame, as before.

A request or an answer of :data:`LARGE` bytes or more (a jobs file's 10,000 jobs and their
replies) is followed, once its answer is written and let go, by ``on_large`` (the daemon's: a
``malloc_trim``, :class:`berth.daemon.process.Trimmer`): what its burst freed in the C heap (its
frame, its rows, its answer) is given back at once: not at the trimmer's next look, and even
when the daemon grew by less than the trimmer's bound since its last trim (issue 35).

A handler's future is held as it is (no task, no second future to carry its answer): its
result becomes ``{"ok": true, ...}`` and its failure the error reply as it is written. The
futures still unanswered are what the daemon waits for, then cancels, when it stops
(:meth:`Answers.waiting`).
"""

from __future__ import annotations

import asyncio
from collections import deque

from berth.daemon.requests.replies import error_reply
from berth.daemon.requests.stream import Stream, write_stream
from berth.wire import protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    # an answer made, or a future of one; the size of its request's frame; whether the
    # future is a handler's (its result is the answer's fields, its failure an error reply)
    Answer = dict[str, Any] | Stream | asyncio.Future[Any]
    Item = tuple[Answer, int, bool]

BATCH_BYTES = 256 * 1024  # at most this much of ready answers goes in one write
LARGE = 64 * 1024  # bytes of a request's frame, or of its answer, that make it a burst (an
# array of 10,000 tasks: its answer names them, ~110 KB)


class Answers:
    """The answers of one connection still to be written, in order."""

    __slots__ = ("_ended", "_items", "_wake", "on_large", "writes")

    def __init__(self, on_large: Callable[[], None] | None = None) -> None:
        self._items: deque[Item] = deque()
        self._wake: asyncio.Future[None] | None = None
        self._ended = False
        self.writes = 0  # writes made (a burst's ready answers: one)
        self.on_large = on_large  # after a write that answered a burst (see the module)

    def put(self, answer: Answer, size: int, handler: bool = False) -> None:
        """The next answer: one made, or a future of one (``handler``: a handler's own, whose
        result is the answer's fields)."""
        self._items.append((answer, size, handler))
        self._poke()

    def end(self) -> None:
        """No more answers come: the writer stops once it has written the ones put."""
        self._ended = True
        self._poke()

    def waiting(self) -> list[asyncio.Future[Any]]:
        """The futures of answers not yet written (the requests in hand)."""
        return [a for a, _, _ in self._items if isinstance(a, asyncio.Future)]

    def _poke(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def write(
        self, writer: asyncio.StreamWriter, written: Callable[[int], None]
    ) -> None:
        """Write the answers as they become ready, until :meth:`end`; ``written(size)`` once
        for each, after the client took it (``drain``)."""
        items = self._items
        while True:
            if not items:
                if self._ended:
                    return
                self._wake = asyncio.get_running_loop().create_future()
                await self._wake
                self._wake = None
                continue
            answer, size, _ = items[0]
            if isinstance(answer, asyncio.Future) and not answer.done():
                await _ready(answer)
            if isinstance(answer, asyncio.Future) and answer.cancelled():
                raise asyncio.CancelledError  # (the daemon stops: close())
            if isinstance(answer, Stream):  # (made by its handler at once, never a future's)
                items.popleft()
                await write_stream(answer, writer, error_reply)
                written(size)
                continue
            del answer  # (once written, nothing of the answer is held here)
            if await self._batch(writer, written) and self.on_large is not None:
                self.on_large()

    async def _batch(self, writer: asyncio.StreamWriter, written: Callable[[int], None]) -> bool:
        """Write the ready answers at the head (at least the first, which is ready), up to a
        stream, an answer to come or :data:`BATCH_BYTES`, in one write; whether one of them
        (or its request) was :data:`LARGE`."""
        items = self._items
        frames: list[bytes] = []
        sizes: list[int] = []
        length = 0
        large = False
        while items and length < BATCH_BYTES:
            answer, size, handler = items[0]
            if isinstance(answer, asyncio.Future) and (not answer.done() or answer.cancelled()):
                break
            if isinstance(answer, Stream):
                break
            items.popleft()
            frame = protocol.encode(_made(answer, handler))
            frames.append(frame)
            sizes.append(size)
            length += len(frame)
            large = large or len(frame) >= LARGE or size >= LARGE
            del answer, frame
        writer.write(b"".join(frames) if len(frames) > 1 else frames[0])
        self.writes += 1
        del frames
        await writer.drain()  # returns at once unless the client does not read
        for size in sizes:
            written(size)
        return large


async def _ready(fut: asyncio.Future[Any]) -> None:
    """Until ``fut`` is done (its failure is an answer, not raised here; the writer cancelled
    leaves it be: :meth:`Answers.waiting`)."""
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def done(_: asyncio.Future[Any]) -> None:
        if not waiter.done():
            waiter.set_result(None)

    fut.add_done_callback(done)
    try:
        await waiter
    finally:
        fut.remove_done_callback(done)


def _made(answer: Answer, handler: bool) -> dict[str, Any]:
    """The answer of a ready item (not a stream): a handler's future's result as ``{"ok":
    true, ...}``, its failure as the error reply; a guarded task's result as it is."""
    if not isinstance(answer, asyncio.Future):
        return answer  # type: ignore[return-value]
    e = answer.exception()
    if e is not None:
        if not isinstance(e, Exception):
            raise e
        return error_reply(e)
    result = answer.result()
    return {"ok": True, **result} if handler else result
