"""A claim: the GPUs one process claimed together, one claim file (and descriptor) per GPU,
under one lease id.

Made by :meth:`berth.claims.ledger.Ledger.claim`; the on-disk format is in
:mod:`berth.claims.files`. (``berth.acquire()`` hands its caller a :class:`berth.api.lease.Lease`,
which holds one of these and also sets the process's CUDA environment.)
"""

from __future__ import annotations

import contextlib
import os
import time

from berth.claims import files
from berth.claims.procs import user_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable


class Claim:
    """GPUs claimed by this process: one file (and one descriptor) per GPU.

    ``fds`` keep the claims alive: hand them to a child (``pass_fds``) and the claims live as
    long as any process holding them. :meth:`release` ends the claims (unlinks the files);
    :meth:`detach` only closes this process's descriptors (a child keeps the claims)."""

    def __init__(self, lease_id: str, uuids: list[str], indices: list[int | None]) -> None:
        self.lease_id = lease_id
        self.uuids = uuids
        self.indices = indices
        self.share = 1.0
        self.mem: int | None = None
        self.pids: list[int] = []
        self.command = ""
        self.label: str | None = None
        self.since = time.time()
        self.fds: list[int] = []
        self.paths: list[str] = []
        self.idents: list[tuple[int, int]] = []  # (device, inode) of each file, as made

    @property
    def active(self) -> bool:
        return bool(self.fds)

    def body(self, uuid: str, index: int | None) -> bytes:
        return files.encode_body(
            {
                "v": 1, "lease": self.lease_id, "gpu": uuid, "index": index, "gpus": self.uuids,
                "share": self.share, "mem": self.mem or 0, "uid": os.geteuid(),
                "user": user_name(os.geteuid()), "pids": self.pids, "command": self.command,
                "since": self.since, "label": self.label,
            }
        )  # fmt: skip

    def set_pids(self, pids: Iterable[int], command: str | None = None) -> None:
        """Record the holder pids (e.g. after spawning the command that inherits the fds)."""
        self.pids = sorted({*self.pids, *pids})
        if command is not None:
            self.command = command
        for fd, uuid, index in zip(self.fds, self.uuids, self.indices, strict=True):
            files.write_body(fd, self.body(uuid, index))

    def release(self) -> None:
        """End the claims: unlink the files (waking waiters) and close the descriptors."""
        for path, fd in zip(self.paths, self.fds, strict=True):
            try:
                st, mine = os.stat(path), os.fstat(fd)
                if (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino):
                    os.unlink(path)
            except OSError:
                pass
        self.detach()

    def detach(self) -> None:
        """Close this process's descriptors; the claims live on in whoever else holds them."""
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []
        self.paths = []

    def __repr__(self) -> str:
        return f"Claim({self.lease_id}, gpus={self.indices or self.uuids}, share={self.share:g})"
