"""The dashboard's caps: how many connections and live streams each identity may hold.

The global caps (:data:`MAX_CONNECTIONS`, :data:`MAX_STREAMS`) are the last line of
defence; below them each identity has a share, so that one local user cannot make the
dashboard answer 503 to the others (issue 41.8):

- a connection whose request is not read whole yet is *pending*: no token is read yet, but
  the kernel says whose socket it is (:mod:`berth.web.peers`: a loopback peer's uid, a
  remote peer's address). Each owner has at most :data:`PENDING_PER_OWNER` pending: past
  them, its new one closes its own oldest (408) if that one has had :data:`GRACE` seconds,
  else the new one is refused (503): one user's flood of new connections fills only their
  own share, never the global cap. Past :data:`PENDING` of them all, a new one
  closes the oldest pending one (answered 408) if that one has had :data:`GRACE` seconds to
  send its request: a client that sends it at once is read long before, one that sends it a
  byte at a time is what gets closed (a burst of new connections does not close each other
  before their requests are read: they wait, up to the global cap). The request must arrive
  whole within the head's deadline anyway (``httpio.HEAD_TIMEOUT``).
- once read, a request with a valid token counts against its uid (at most
  :data:`PER_USER` connections, :data:`STREAMS_PER_USER` of them streams); one without (or
  with a token that is not valid) against one bucket all anonymous viewers share
  (:data:`ANONYMOUS` connections, :data:`STREAMS_ANONYMOUS` streams: fewer streams than
  connections, so that anonymous streams never keep the page itself from loading).

- a refused connection (503, 408, a bad request) gives its place back at once: it counts
  in no cap, the global one included. It stays open a moment after its answer
  (``server.LINGER``, so that the client reads why before the close) only if its owner has
  fewer than :data:`LINGER_PER_OWNER` doing so (and all owners fewer than :data:`LINGERING`);
  else it is closed at once. One user who sends hundreds of requests the server refuses
  fills neither the global cap nor the daemon's descriptors (docs/web.md, "Limits").

Pure accounting: the server asks, closes what it is told to and gives back what it took.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MAX_CONNECTIONS = 64
MAX_STREAMS = 32
PENDING = 16  # connections whose request is still being read (more only while they are new)
PENDING_PER_OWNER = 16  # of them, of one owner (berth.web.peers: a uid, an address)
GRACE = 1.0  # seconds a new connection has to send its request before it may be closed for room
PER_USER = 16  # connections of one signed-in uid
STREAMS_PER_USER = 8
ANONYMOUS = 16  # connections without a (valid) token, all together
STREAMS_ANONYMOUS = 8
NOBODY = -1  # the identity of a request without a valid token
LINGER_PER_OWNER = 4  # refused connections of one owner kept open a moment to say why
LINGERING = 32  # ... of all owners together

EVICTED = (
    "closed while the request was still not sent whole, to make room for newer "
    "connections: send the whole request at once"
)


class Refused(Exception):
    """Over a cap: ``message`` says which and what to do (answered with ``status``)."""

    def __init__(self, message: str, status: int = 503) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class Slot:
    """One connection's place: ``pending`` until its request is read, then its identity's
    (``held``) or only the global cap's (``refused``: saying why), ``gone`` once given back."""

    __slots__ = ("evict", "owner", "since", "state", "stream", "who")

    def __init__(self, evict: Callable[[], None], since: float, owner: str = "") -> None:
        self.evict = evict
        self.since = since
        self.owner = owner  # whose socket it is (berth.web.peers), known before it is read
        self.state = "pending"
        self.who = NOBODY
        self.stream = False


class Caps:
    def __init__(self) -> None:
        self.open = 0
        self.pending: dict[Slot, None] = {}  # oldest first
        self.unread: dict[str, dict[Slot, None]] = {}  # the same, by owner
        self.held: dict[int, int] = {}  # identity -> connections
        self.streams: dict[int, int] = {}  # identity -> streams
        self.live = 0  # streams, all identities
        self.lingering: dict[str, int] = {}  # owner -> refused connections saying why

    def admit(self, evict: Callable[[], None], now: float, owner: str = "") -> Slot:
        """A place for a new connection of ``owner`` at ``now`` (seconds, any clock):
        ``evict()`` closes it if it must make room while pending. Past
        :data:`PENDING_PER_OWNER` of the owner's pending connections, its oldest is closed if
        it has had :data:`GRACE` seconds to send its request, else the new one is refused.
        Past :data:`PENDING` pending connections (or the global cap) the oldest pending one
        is closed, if it has had :data:`GRACE` seconds to send its request; else the new one
        waits among them, up to the global cap."""
        mine = self.unread.get(owner)
        if mine is not None and len(mine) >= PENDING_PER_OWNER:
            first = next(iter(mine))
            if now - first.since < GRACE:
                raise Refused(
                    f"more than {PENDING_PER_OWNER} connections of {owner or 'one peer'} "
                    "whose request is not sent yet: send each request whole, at once"
                )  # fmt: skip
            self._give_back(first)
            first.evict()
        if len(self.pending) >= PENDING or self.open >= MAX_CONNECTIONS:
            oldest = next(iter(self.pending), None)
            if oldest is not None and now - oldest.since >= GRACE:
                self._give_back(oldest)  # (its connection is closing: its place is the new one's)
                oldest.evict()
            elif self.open >= MAX_CONNECTIONS:
                raise Refused(f"more than {MAX_CONNECTIONS} connections open")
        slot = Slot(evict, now, owner)
        self.pending[slot] = None
        self.unread.setdefault(owner, {})[slot] = None
        self.open += 1
        return slot

    def read(self, slot: Slot, who: int) -> None:
        """The connection's request is read: it counts against ``who`` (a uid, or
        :data:`NOBODY`) from now on, if that identity has room."""
        if slot.state != "pending":
            raise Refused(EVICTED, 408)
        self._unpend(slot)
        have = self.held.get(who, 0)
        cap = ANONYMOUS if who == NOBODY else PER_USER
        if have >= cap:
            slot.state = "refused"
            raise Refused(_over(who, cap, "connections open"))
        self.held[who] = have + 1
        slot.who, slot.state = who, "held"

    def refused(self, slot: Slot) -> None:
        """The connection was refused: it gives back its place at once (whether it may stay
        open a moment to say why is :meth:`linger`'s to say)."""
        self.close(slot)

    def linger(self, owner: str) -> bool:
        """May a refused connection of ``owner`` stay open a moment to say why? Yes (and it
        counts until :meth:`lingered`) while its owner has fewer than
        :data:`LINGER_PER_OWNER` doing so, and everyone fewer than :data:`LINGERING`."""
        mine = self.lingering.get(owner, 0)
        if mine >= LINGER_PER_OWNER or sum(self.lingering.values()) >= LINGERING:
            return False
        self.lingering[owner] = mine + 1
        return True

    def lingered(self, owner: str) -> None:
        """A refused connection that :meth:`linger` let stay is closed."""
        _drop(self.lingering, owner)

    def stream(self, slot: Slot) -> None:
        """The connection becomes a live stream, if its identity and the server have room."""
        have = self.streams.get(slot.who, 0)
        cap = STREAMS_ANONYMOUS if slot.who == NOBODY else STREAMS_PER_USER
        if have >= cap:
            raise Refused(_over(slot.who, cap, "live viewers"))
        if self.live >= MAX_STREAMS:
            raise Refused(f"more than {MAX_STREAMS} live viewers")
        self.streams[slot.who] = have + 1
        self.live += 1
        slot.stream = True

    def end_stream(self, slot: Slot) -> None:
        if slot.stream:
            slot.stream = False
            self.live -= 1
            _drop(self.streams, slot.who)

    def close(self, slot: Slot) -> None:
        """The connection is closed: give back what it held (once, whatever happened)."""
        self.end_stream(slot)
        self._give_back(slot)

    def _give_back(self, slot: Slot) -> None:
        if slot.state == "pending":
            self._unpend(slot)
            self.open -= 1
        elif slot.state == "held":
            _drop(self.held, slot.who)
            self.open -= 1
        elif slot.state == "refused":
            self.open -= 1
        slot.state = "gone"

    def _unpend(self, slot: Slot) -> None:
        del self.pending[slot]
        mine = self.unread[slot.owner]
        del mine[slot]
        if not mine:
            del self.unread[slot.owner]

    def count(self, who: int) -> tuple[int, int]:
        """(connections, streams) ``who`` holds now."""
        return self.held.get(who, 0), self.streams.get(who, 0)


def _drop(counts: dict[Any, int], who: object) -> None:
    left = counts.get(who, 0) - 1
    if left > 0:
        counts[who] = left
    else:
        counts.pop(who, None)


def _over(who: int, cap: int, what: str) -> str:
    if who == NOBODY:
        return (
            f"more than {cap} {what} without a token (anonymous viewers share them): sign in "
            "with the token `berth web-token` prints to have a share of your own"
        )
    return f"more than {cap} {what} of uid {who} (each user's share): close some"
