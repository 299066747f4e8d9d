"""inotify through ctypes (libc's ``inotify_init1``/``inotify_add_watch``): a descriptor that
becomes readable when a watched directory's files change, and the events it queued.

A leaf: the standard library only; the one binding of inotify (`berth logs -f`, the ledger's
:mod:`berth.claims.wake` and the daemon's :mod:`berth.claims.listing`). Where inotify cannot be
had (no libc symbol, a directory not readable, the kernel's watch limit), callers get None and
poll instead.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

IN_MODIFY = 0x00000002
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_Q_OVERFLOW = 0x00004000
IN_MASK_ADD = 0x20000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
_HEADER = struct.Struct("iIII")


def watch(paths: list[str], mask: int) -> int | None:
    """A non-blocking inotify descriptor watching each of ``paths`` for ``mask``, or None
    where inotify cannot be had for every one of them (``[]``: one watching nothing yet, for
    :func:`add`)."""
    try:
        libc = _libc()
        fd = int(libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    for path in paths:
        if add(fd, path, mask) != 0:
            os.close(fd)
            return None
    return fd


def add(fd: int, path: str, mask: int) -> int:
    """Watch ``path`` too on ``fd`` (from :func:`watch`): 0, or the errno that refused it
    (ENOENT: no such directory yet; others: it cannot be watched)."""
    libc = _libc()
    if libc.inotify_add_watch(fd, os.fsencode(path), mask) < 0:
        return ctypes.get_errno() or errno.EIO
    return 0


_cdll: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    global _cdll
    if _cdll is None:
        _cdll = ctypes.CDLL(None, use_errno=True)
    return _cdll


_READ = 65536
_LARGEST = _HEADER.size + 256  # an event with the longest name (NAME_MAX, its NUL, padding)


def events(fd: int) -> list[tuple[int, str]]:
    """The events queued on ``fd``, read without waiting: (mask, the name it is about; "" for
    the watched directory itself or an overflow). A read that left room for another event
    emptied the queue: no second read to learn so (one system call, not two, a look that
    finds events; the daemon's ledger looks several times a pass)."""
    out: list[tuple[int, str]] = []
    while True:
        try:
            data = os.read(fd, _READ)
        except BlockingIOError:
            return out
        pos = 0
        while pos + _HEADER.size <= len(data):
            _wd, mask, _cookie, length = _HEADER.unpack_from(data, pos)
            raw = data[pos + _HEADER.size : pos + _HEADER.size + length]
            pos += _HEADER.size + length
            out.append((mask, os.fsdecode(raw.rstrip(b"\0"))))
        if len(data) <= _READ - _LARGEST:
            return out


def names(fd: int) -> set[str] | None:
    """The names of the files the events queued on ``fd`` are about (read without waiting);
    None when the queue overflowed (anything may have changed)."""
    out: set[str] = set()
    for mask, name in events(fd):
        if mask & IN_Q_OVERFLOW:
            return None
        out.add(name)
    return out
