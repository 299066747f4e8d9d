"""Claims made outside the queue (`berth run`, ``berth.acquire``, GPUScheduler: no daemon in
between), charged to their users like jobs (issue 20.15).

The engine's ledger scans see every claim; those of its own jobs aside (files of the daemon's
user named with a running job's lease), each lease of each owner is that user's (the claim
file's owner: never what its body says, nor whose lease its name gives) holding the GPUs it has any share
of, each whole (issue 41.3: a 0.01 share keeps the GPU from every exclusive job).
:class:`Claimers` follows them from scan to scan:

- what each user holds now counts against their ``max_gpus`` with their running jobs, so
  their queue jobs wait (``UserGpuLimit``) while their `berth run` holds the GPUs they may
  have (the daemon cannot stop a claim made without it; it stops giving more);
- what they used counts in fair share: a claim's GPU-seconds accrue from the moment the
  daemon first saw it (a body's ``since`` is the user's to write) until it is gone, and are
  then added to the user's usage like an ended attempt's.
"""

from __future__ import annotations

import os

from berth.claims.ownfiles import of_our_jobs
from berth.core.fairshare import accrued

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping

    from berth.claims.state import ClaimInfo


class Claimers:
    """The claims outside the queue at the last scan: "uid:lease" -> (user, GPUs, first
    seen), and the GPUs (indices) each holds part of. A lease is only a name (any user may
    give a hand-made claim file any): its files count for their owner, each owner apart, and
    as a job's of the daemon only where the daemon's user owns them."""

    def __init__(self) -> None:
        self.live: dict[str, tuple[str, float, float]] = {}
        self.where: dict[str, frozenset[int]] = {}

    def seen(
        self, claims: Iterable[ClaimInfo], own: Collection[str], now: float,
        index: Mapping[str, int] | None = None,
    ) -> list[tuple[str, float, float]]:  # fmt: skip
        """Take in a scan's living claims (``own``: our jobs' leases; ``index``: the daemon's
        GPUs, UUID -> index, the UUID from the claim file's name, never its body); the claims
        gone since the last one: (user, GPUs, first seen)."""
        current: dict[str, tuple[str, float]] = {}
        where: dict[str, set[int]] = {}
        me = os.geteuid()
        for c in claims:
            if of_our_jobs(c, own, me):
                continue  # (our job's: a file of ours; another's named so is theirs)
            held = f"{c.uid}:{c.lease}"  # (a lease is a name anyone may give: one per owner)
            user, gpus = current.get(held, (c.user or str(c.uid), 0.0))
            current[held] = (user, gpus + 1.0)  # (a share counts whole)
            k = index.get(c.uuid) if index is not None else None
            if k is not None:
                where.setdefault(held, set()).add(k)
        gone = [v for lease, v in self.live.items() if lease not in current]
        self.where = {lease: frozenset(g) for lease, g in where.items()}
        self.live = {
            lease: (user, gpus, self.live[lease][2] if lease in self.live else now)
            for lease, (user, gpus) in current.items()
        }
        return gone

    def held(self) -> dict[str, set[int]]:
        """User -> the GPUs (indices) they hold any part of outside the queue now."""
        out: dict[str, set[int]] = {}
        for lease, (user, _, _) in self.live.items():
            out.setdefault(user, set()).update(self.where.get(lease, ()))
        return out

    def usage(self, now: float, half_life: float) -> dict[str, float]:
        """User -> decayed GPU-seconds of the claims still held (so far)."""
        out: dict[str, float] = {}
        for user, gpus, since in self.live.values():
            out[user] = out.get(user, 0.0) + accrued(gpus, since, now, now, half_life)
        return out
