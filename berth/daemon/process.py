"""The daemon process's own settings and facts: its garbage collector tuned for a heap of
long-lived jobs, the C heap's free pages given back (:class:`Trimmer`), its descriptor limit,
the machine's boot."""

from __future__ import annotations

import ctypes
import gc
import os
import resource

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable


def tune_gc() -> None:
    """The cyclic garbage collector, for a heap of long-lived jobs: what start-up made (the
    modules, the jobs recovered) is set aside for good (``gc.freeze``: never scanned again,
    still freed when unreferenced), the young generation is collected every 10,000
    allocations instead of 700, and a whole-heap collection comes at most every 100 of the
    middle one's instead of 10. With 100,000 jobs queued, the defaults' whole-heap scans took
    1.5-2.6 s of 100,000 pipelined submits' ~20 s, a pause of up to 0.3 s each (issue 21)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 100)


def raise_fd_limit() -> None:
    """Take every descriptor the system allows (connections are capped per user, see
    :mod:`berth.daemon.requests.server`; the rest is headroom for run files, claims and logs)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass


def boot_id() -> str | None:
    """This boot of the machine (a restart of the machine ends every supervisor)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or None
    except OSError:
        return None


TRIM_EVERY = 2.0  # seconds between two looks at the daemon's resident memory
TRIM_GROWN = 4 << 20  # bytes it may grow by since the last trim before it trims again
TRIM_GAP = 0.25  # seconds between two trims after bursts (a trim walks the heap: ~0.3-5 ms)


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (None where the C library has none: musl)."""
    try:
        fn = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def rss() -> int:
    """The daemon's resident memory in bytes (``/proc/self/statm``; 0 if unreadable)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class Trimmer:
    """Gives the C heap's free pages back to the system (``malloc_trim(0)``) once the daemon
    has grown by :data:`TRIM_GROWN` since the last time: what a burst leaves behind (the
    rows of a 10,000-job commit, the frames of a whole-queue listing) is freed by Python
    but kept by the C allocator, between the long-lived jobs, as resident memory (issue
    35.2: ~15 % of the daemon with 100,000 queued). A look every :data:`TRIM_EVERY` seconds
    costs one read of ``/proc/self/statm``; a trim, a walk of the heap (milliseconds)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.trim = _malloc_trim()
        self.low = rss()  # resident after the last trim
        self.trims = 0
        self._timer: asyncio.TimerHandle | None = None
        self._last = -TRIM_GAP  # (the loop's time of the last trim)
        self._soon: asyncio.TimerHandle | None = None  # (a burst's trim put off to the gap's end)

    def start(self) -> None:
        if self.trim is not None:
            self._timer = self.loop.call_later(TRIM_EVERY, self._tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._soon is not None:
            self._soon.cancel()
            self._soon = None

    def after_burst(self) -> None:
        """After a burst's answer (:mod:`berth.daemon.requests.answers`): trim now, or, within
        :data:`TRIM_GAP` of the last trim, once at the gap's end: a client asking for large
        answers back to back costs the loop one trim a gap, not one an answer."""
        if self.trim is None or self._soon is not None:
            return
        wait = self._last + TRIM_GAP - self.loop.time()
        if wait <= 0:
            self.now()
        else:
            self._soon = self.loop.call_later(wait, self._put_off)

    def _put_off(self) -> None:
        self._soon = None
        self.now()

    def _tick(self) -> None:
        now = rss()
        if now > self.low + TRIM_GROWN or now < self.low:
            self.now()
        self._timer = self.loop.call_later(TRIM_EVERY, self._tick)

    def now(self) -> None:
        """Trim at once."""
        if self.trim is not None:
            self.trim(0)
            self.trims += 1
            self.low = rss()
            self._last = self.loop.time()
