"""Claim first, then check: how claims exclude each other without any lock.

The ledger directory is shared by every user of the host, so any lock in it is a lock every
user can take and keep (``flock`` needs only a descriptor): one stopped or hostile process
would freeze every claimer, the daemon included. So no claim waits for anybody. Instead:

1. the claimer creates its claim files (locked, then renamed into place: see
   :func:`berth.claims.files.create_locked`), one per GPU;
2. then it lists the living claims of those GPUs again, its own excepted, and checks that
   they and its own fit: shares sum to at most 1, declared memory to at most the card's;
3. if not, it withdraws (unlinks its files) and reports a conflict; the caller may look
   again a moment later.

Two claims that together would overfill a GPU cannot both stand: each made its file before it
listed, so whichever listed last saw the other's file (step 2 counts every living claim file,
whether or not its owner has checked yet) and withdrew. Both may withdraw at once; they then
retry after a random pause. A process stopped between steps 1 and 3 holds its files like a
claim (conservatively counted), no more: it blocks only the GPUs it asked for, as a claim
would, and nobody waits for it.
"""

from __future__ import annotations

import os

from berth.claims import files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

    from berth.claims.claim import Claim

    Parse = Callable[[str], tuple[str, str, float, int] | None]


def conflicts(
    path: str,
    claim: Claim,
    memory_total: Mapping[str, int | None],
    skip: Collection[str] = (),
    names: Iterable[str] | None = None,
    inodes: Mapping[str, int] | None = None,
    parse: Parse = files.parse_claim_name,
) -> str | None:
    """Why ``claim`` (just created in ledger ``path``) must withdraw, or None if it stands.

    ``names``: the ledger's names listed after the claim's files were made (default: list
    them), less those a scan sets aside (one owner's files past their share: such a file
    counts nowhere, see :mod:`berth.claims.ledger`), or only those of the inodes locked when
    /proc/locks was read after they were made: a living claim file is locked before it is
    named, so of two claimers, whichever read last saw the other's files, as with a listing.

    ``skip``: leases of ours whose capacity this claim may use (``$BERTH_LEASE``'s, held by
    an ancestor): their files count only if this user owns them.

    ``inodes``: each of ``names``' inode, as that listing found it (the kept listing's, or
    the directory's entries): a name of the claim's own lease whose inode is one of the files
    it made is that file, there (it holds their lock: it lives), and is not looked at again.
    ``parse``: how a name is parsed (the kept listing parses each once)."""
    return conflicts_each(path, [claim], memory_total, skip, names, inodes, parse)[0]


def conflicts_each(
    path: str,
    claims: Sequence[Claim],
    memory_total: Mapping[str, int | None],
    skip: Collection[str] = (),
    names: Iterable[str] | None = None,
    inodes: Mapping[str, int] | None = None,
    parse: Parse = files.parse_claim_name,
) -> list[str | None]:
    """:func:`conflicts` of several claims made together (all their files made before
    ``names`` was listed), in one look at the ledger: each counts every other living claim
    of its GPUs, the others of ``claims`` included, as it would if checked alone after all
    were made (so a GPU they overfill together withdraws each of them there)."""
    mine: list[set[tuple[int, int]]] = []
    for claim in claims:
        idents = set(claim.idents)
        if len(claim.idents) != len(claim.fds):  # (made elsewhere: known by its descriptors)
            idents = set()
            for fd in claim.fds:
                st = os.fstat(fd)
                idents.add((st.st_dev, st.st_ino))
        mine.append(idents)
    ours = set().union(*mine)
    # Our own files, known without a look: by their lease and the inode the listing found.
    made = {ident[1]: ident for ident in ours} if inodes is not None else {}
    leases = {claim.lease_id for claim in claims}
    share: dict[str, float] = {}
    mem: dict[str, int] = {}
    for claim in claims:
        for uuid in claim.uuids:
            share[uuid] = share.get(uuid, 0.0) + claim.share
            mem[uuid] = mem.get(uuid, 0) + (claim.mem or 0)
    seen: set[tuple[int, int, str]] = set()
    present: set[tuple[int, int]] = set()
    euid = os.geteuid()
    for name in os.listdir(path) if names is None else names:
        if not name.startswith(files.CLAIM):
            continue
        parsed = parse(name)
        if parsed is None or parsed[0] not in share:
            continue
        uuid, other_id, s, m = parsed
        if other_id in leases and inodes is not None:
            own = made.get(inodes.get(name, -1))
            if own is not None:
                present.add(own)  # (one of the files just made, under its name)
                continue
        p = files.probe(os.path.join(path, name), read=False)
        if p.alive and p.nlink > 1:
            p = files.probe(os.path.join(path, name))  # which of its names is the claim?
            if p.body is not None and (p.body.get("lease"), p.body.get("gpu")) != (other_id, uuid):
                continue  # a hard link its body disowns: not a claim (counted by its name)
        if not p.alive:
            continue
        ident = (p.dev, p.ino)
        if ident in ours:
            present.add(ident)
            continue
        if (other_id in skip and p.uid == euid) or (*ident, uuid) in seen:
            continue  # (a second name of one file counts once per GPU, never hides another)
        seen.add((*ident, uuid))
        share[uuid] += s
        mem[uuid] += m
    return [
        _why(claim, idents <= present, share, mem, memory_total)
        for claim, idents in zip(claims, mine, strict=True)
    ]


def _why(
    claim: Claim, whole: bool, share: Mapping[str, float], mem: Mapping[str, int],
    memory_total: Mapping[str, int | None],
) -> str | None:  # fmt: skip
    if not whole:
        return "a file of this claim was removed while it was made"
    for uuid in claim.uuids:
        if share[uuid] > 1 + 1e-9:
            return f"GPU {uuid}: claimed at the same moment by another process"
        total = memory_total.get(uuid)
        if claim.mem and total is not None and mem[uuid] > total:
            return f"GPU {uuid}: its memory was declared at the same moment by another process"
    return None
