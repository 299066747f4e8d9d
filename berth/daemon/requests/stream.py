"""An answer in several frames (`berth queue --json` of a long queue): what a handler returns
instead of a dict when the answer could be large.

The connection's writer (:meth:`berth.daemon.requests.server.Server._write`) takes the frames
one at a time and awaits the client's reading (``drain``) after each, so however long the
answer, the daemon holds one frame of it (and what the iterator keeps: references to jobs it
already holds) per connection; a client that stops reading stops the iterator. A frame is
``{"ok": true, ...}``; an error while the frames are made ends the answer with an error frame.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any


class Stream:
    """The frames of one answer, made as they are taken (an iterator of dicts, each without
    ``ok``): the request's checks must have run before it is made."""

    __slots__ = ("frames",)

    def __init__(self, frames: Iterator[dict[str, Any]]) -> None:
        self.frames = frames
