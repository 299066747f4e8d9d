"""Whose file a claim's name is: a lease id is only part of a name, which anyone may give a
claim file of their own (the names are in the ledger for every user to read). A caller that
leaves its own leases out of a scan (the daemon: its running jobs') leaves out only the files
it owns, by the kernel's word (the owner a kept listing learned once, else one ``lstat``);
another user's file named with one of those leases is theirs, and counts as theirs."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Container

    from berth.claims.listing import Listing
    from berth.claims.state import ClaimInfo


def is_ours(listing: Listing | None, path: str, name: str, euid: int) -> bool:
    """Is the file ``name`` (at ``path``) owned by ``euid``? (A name gone meanwhile is
    nobody's claim now: True, nothing to count.)"""
    uid = listing.owner.get(name) if listing is not None else None
    if uid is None:
        try:
            uid = os.lstat(path).st_uid
        except OSError:
            return True
    return uid == euid


def of_our_jobs(c: ClaimInfo, leases: Container[str], euid: int) -> bool:
    """Is the scanned claim ``c`` one of our jobs' (a file ``euid`` owns, named with one of
    ``leases``)? Another user's file named with such a lease is theirs, and counts as theirs."""
    return c.lease in leases and c.uid == euid
