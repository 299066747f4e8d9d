"""What one owner's files may cost a scan of the claim ledger (issue 20.10: 50,000 files
planted under claim names stalled the daemon's passes; issue 41.2: 100,000 of them). See
:mod:`berth.claims.ledger`, and :mod:`berth.claims.listing` for the daemon's kept names."""

from __future__ import annotations

import os

from berth.claims import files

# What one user's files may cost a scan (issue 20.10: 50,000 files planted under claim names
# stalled the daemon's passes): at most MAX_FILES_PER_UID files (inodes) of one owner are
# probed (root's: all); a file's other names reuse its probe; at most MAX_LOOKUPS_PER_UID
# unreadable claims of one owner look for their holders in /proc (each reads every /proc/PID/fd).
MAX_FILES_PER_UID = 1024
MAX_LOOKUPS_PER_UID = 8
MAX_NAMES_PER_FILE = 4  # names of one file considered (a claim has 1, 2 while it is made)


class Shares:
    """One scan's bound on what each owner's files cost it (see MAX_FILES_PER_UID): probes
    by file, files probed per owner, names per file, holder lookups per owner, and the names
    past a share (``over``: name -> inode; those of the last scan still there as they were
    come in already), which the next scan skips unseen while they stay."""

    def __init__(self, over: dict[str, int]) -> None:
        self.over = over
        self.probes: dict[tuple[int, int], files.Probe] = {}
        self.per_uid: dict[int, int] = {}
        self.named: dict[tuple[int, int], int] = {}
        self.lookups: dict[int, int] = {}

    def probe(
        self, name: str, path: str, read: bool, parsed: tuple[str, str, float, int] | None
    ) -> files.Probe | None:
        """The file's probe (one per file, whatever its names), or None: gone, past its
        owner's share, a hard link its body disowns, one name too many of one file."""
        try:
            st = os.lstat(path)
        except OSError:
            return None
        ident = (st.st_dev, st.st_ino)
        p = self.probes.get(ident)
        if p is None:
            if st.st_uid and self.per_uid.get(st.st_uid, 0) >= MAX_FILES_PER_UID:
                self.over[name] = st.st_ino
                return None
            self.per_uid[st.st_uid] = self.per_uid.get(st.st_uid, 0) + 1
            p = files.probe(path, read=read)
            if p.alive and parsed is not None and p.nlink > 1 and not read:
                p = files.probe(path)  # a second name: its body says which one is the claim
            if (p.dev, p.ino) == ident:
                self.probes[ident] = p
        if parsed is not None and p.nlink > 1 and p.body is not None:
            if (p.body.get("lease"), p.body.get("gpu")) != parsed[1::-1]:
                return None  # a hard link its body disowns (before any lookup of holders)
        self.named[ident] = self.named.get(ident, 0) + 1
        if self.named[ident] > MAX_NAMES_PER_FILE:
            self.over[name] = st.st_ino
            return None  # hard links by the thousand: one file, one claim at most
        return p
