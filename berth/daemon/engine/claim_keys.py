"""Which claim each claim file is, for the enforcer: a lease id is only part of a file's
name, and every user reads the names in the ledger, so a user may name hand-made files of
their own with another's lease. A claim is one lease *of one owner* (the kernel's word: the
file's owner), never a lease alone:

- the daemon's own files of a running job's lease are that job's ("job 12");
- the other files of a lease are the claim of the owner who placed one first (its file's
  ctime, which no user can set back: the lease's maker, as nobody knows a lease before its
  first file is in place), keyed ``claim <lease>``; any other owner's files named with it, or
  with a running job's lease, are a claim of that owner alone, ``claim <lease> of uid U``,
  judged on their own: they can neither make the lease's claim ungranted (its processes then
  nobody's, killed as outside berth) nor pass for it.
"""

from __future__ import annotations

from berth.claims.ownfiles import of_our_jobs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from berth.claims.state import ClaimInfo


def keyed(
    scanned: Sequence[ClaimInfo], own: Mapping[str, str], me: int
) -> tuple[dict[str, list[ClaimInfo]], dict[str, str]]:
    """(key -> the files of each claim other than the daemon's own, path -> key of every
    file); ``own``: lease -> "job N" of the daemon's running jobs, ``me``: its uid."""
    maker: dict[str, tuple[int, int]] = {}  # lease -> (placed, uid) of its first file
    for c in scanned:
        if c.lease not in own:
            first = (c.placed, c.uid)
            if c.lease not in maker or first < maker[c.lease]:
                maker[c.lease] = first
    claims: dict[str, list[ClaimInfo]] = {}
    by_file: dict[str, str] = {}
    for c in scanned:
        if of_our_jobs(c, own, me):
            by_file[c.path] = own[c.lease]
            continue
        if c.lease not in own and maker[c.lease][1] == c.uid:
            key = f"claim {c.lease}"
        else:
            key = f"claim {c.lease} of uid {c.uid}"
        by_file[c.path] = key
        claims.setdefault(key, []).append(c)
    return claims, by_file
