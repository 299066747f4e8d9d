"""What `berth logs -f` (and `submit -i`) waits on between two reads of a job's logs: a write
to a log, seen by inotify on the logs' directories (a line shows within milliseconds of being
written), and the job's end, awaited from the backend in a thread (the daemon answers the
moment it ends). A log's directory that is not there yet (``-o runs/7/out.log``: the job
makes it when it starts) is awaited by inotify too, on its nearest ancestor that is, then
watched. Where inotify cannot be had (the directory not readable, the kernel's watch limit)
or may miss writes (Slurm's logs on a network file system, written on another node), the
logs are read again every :data:`POLL` (Slurm: :data:`POLL_SLURM`) seconds as well.
"""

from __future__ import annotations

import _thread
import errno
import os
import select

from berth import inotify

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.backends.base import Backend, JobInfo

POLL = 0.1  # seconds between reads where inotify cannot be had
POLL_SLURM = 0.5
MASK = inotify.IN_MODIFY | inotify.IN_CREATE | inotify.IN_MOVED_TO | inotify.IN_CLOSE_WRITE
# An ancestor of a log's directory that is not there yet: only what is made in it (added to
# what it is watched for already, should it be another log's directory).
AWAIT = inotify.IN_CREATE | inotify.IN_MOVED_TO | inotify.IN_MASK_ADD


class Wakes:
    """Wait for something to read or for the job's end. :meth:`wait` returns when a log was
    written, the job ended (:attr:`ended`) or the poll interval passed."""

    def __init__(self, backend: Backend, job_id: str, paths: list[str]) -> None:
        self.backend = backend
        self.job_id = job_id
        self.names = {os.path.basename(p) for p in paths}
        self.fd = inotify.watch([], MASK)
        self.missing: list[str] = []  # directories not there yet, awaited on an ancestor
        self.steps: set[str] = set()  # the names on their way there
        if self.fd is not None and not self._arm(
            sorted({os.path.dirname(os.path.abspath(p)) for p in paths})
        ):
            self.close()
        slurm = backend.name == "slurm"
        self.poll: float | None = POLL_SLURM if slurm else (None if self.fd is not None else POLL)
        self.ended = False
        self._info: JobInfo | None = None
        self._error: BaseException | None = None
        self._r, self._w = os.pipe()
        self._waiting = False  # the thread awaiting the end started (at the first wait)

    def _arm(self, dirs: list[str]) -> bool:
        """Watch each of ``dirs``; one not there yet is awaited on its nearest ancestor that
        is (kept in :attr:`missing` until it is watched). False: one cannot be watched."""
        assert self.fd is not None
        self.missing = []
        self.steps = set()
        for d in dirs:
            while (err := inotify.add(self.fd, d, MASK)) == errno.ENOENT:
                there = _nearest(d)
                if inotify.add(self.fd, there, AWAIT) != 0:
                    return False
                if _nearest(d) == there:  # (else made meanwhile, unseen: look again)
                    self.missing.append(d)
                    self.steps.update(os.path.relpath(d, there).split(os.sep))
                    break
            else:
                if err != 0:
                    return False
        return True

    def _await_end(self) -> None:
        try:
            self._info = self.backend.wait(self.job_id, float("inf"))
        except BaseException as e:  # (raised in the caller's thread: :meth:`info`)
            self._error = e
        self.ended = True
        os.write(self._w, b"!")

    def info(self) -> JobInfo | None:
        """The job as it ended (None: the backend knows no such job)."""
        if self._error is not None:
            raise self._error
        return self._info

    def wait(self) -> None:
        if not self._waiting:
            # Not before: the first read of the logs (the job's first line, maybe) would wait
            # for the GIL while the thread connects. A bare thread (_thread): threading's
            # start() waits until the new thread runs, and its import costs ~3 ms (functools,
            # collections); this one needs neither a join nor a name (it dies with us).
            _thread.start_new_thread(self._await_end, ())
            self._waiting = True
        while not self.ended:
            watched = [self._r] if self.fd is None else [self._r, self.fd]
            try:
                ready, _, _ = select.select(watched, [], [], self.poll)
            except InterruptedError:
                continue
            if not ready or self._r in ready:
                return
            assert self.fd is not None
            touched = inotify.names(self.fd)  # (None: the queue overflowed, anything changed)
            if self.missing and (touched is None or touched & self.steps):
                if not self._arm(self.missing):  # (an awaited directory, or a step to it)
                    self.close()
                    self.poll = self.poll or POLL
                return
            if touched is None or touched & self.names:
                return

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _nearest(path: str) -> str:
    """``path`` if it is a directory, else its nearest ancestor that is."""
    while not os.path.isdir(path) and path != os.path.dirname(path):
        path = os.path.dirname(path)
    return path
