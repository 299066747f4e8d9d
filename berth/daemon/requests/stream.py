"""An answer in several frames (`berth queue --json` of a long queue): what a handler returns
instead of a dict when the answer could be large.

The connection's writer (:meth:`berth.daemon.requests.server.Server._write`) takes the frames
one at a time and awaits the client's reading (``drain``) after each, so however long the
answer, the daemon holds one frame of it (and what the iterator keeps: references to jobs it
already holds) per connection; a client that stops reading stops the iterator. A frame is
``{"ok": true, ...}``; an error while the frames are made ends the answer with an error frame.
"""

from __future__ import annotations

from berth.wire import protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Iterator
    from typing import Any


class Stream:
    """The frames of one answer, made as they are taken (an iterator of dicts, each without
    ``ok``): the request's checks must have run before it is made."""

    __slots__ = ("frames",)

    def __init__(self, frames: Iterator[dict[str, Any]]) -> None:
        self.frames = frames


async def write_stream(
    answer: Stream, writer: asyncio.StreamWriter, error: Callable[[Exception], dict[str, Any]]
) -> None:
    """Write ``answer``'s frames one at a time, each once the client has taken most of the
    one before (``drain``); an exception while a frame is made: ``error(e)``'s frame ends it."""
    while True:
        try:
            frame = next(answer.frames, None)
        except Exception as e:
            writer.write(protocol.encode(error(e)))
            await writer.drain()
            return
        if frame is None:
            return
        writer.write(protocol.encode({"ok": True, **frame}))
        del frame
        await writer.drain()
