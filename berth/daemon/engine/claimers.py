"""Claims made outside the queue (`berth run`, ``berth.acquire``, GPUScheduler: no daemon in
between), charged to their users like jobs (issue 20.15).

The engine's ledger scans see every claim; those of its own jobs aside, each lease is one
user's (the claim file's owner: never what its body says) holding the sum of its shares.
:class:`Claimers` follows them from scan to scan:

- what each user holds now counts against their ``max_gpus`` with their running jobs, so
  their queue jobs wait (``UserGpuLimit``) while their `berth run` holds the GPUs they may
  have (the daemon cannot stop a claim made without it; it stops giving more);
- what they used counts in fair share: a claim's GPU-seconds accrue from the moment the
  daemon first saw it (a body's ``since`` is the user's to write) until it is gone, and are
  then added to the user's usage like an ended attempt's.
"""

from __future__ import annotations

from berth.core.fairshare import accrued

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable

    from berth.claims.state import ClaimInfo


class Claimers:
    """The claims outside the queue at the last scan: lease -> (user, GPUs, first seen)."""

    def __init__(self) -> None:
        self.live: dict[str, tuple[str, float, float]] = {}

    def seen(
        self, claims: Iterable[ClaimInfo], own: Collection[str], now: float
    ) -> list[tuple[str, float, float]]:
        """Take in a scan's living claims (``own``: our jobs' leases); the claims gone since
        the last one: (user, GPUs, first seen)."""
        current: dict[str, tuple[str, float]] = {}
        for c in claims:
            if c.lease in own:
                continue
            user, gpus = current.get(c.lease, (c.user or str(c.uid), 0.0))
            current[c.lease] = (user, gpus + c.share)
        gone = [v for lease, v in self.live.items() if lease not in current]
        self.live = {
            lease: (user, gpus, self.live[lease][2] if lease in self.live else now)
            for lease, (user, gpus) in current.items()
        }
        return gone

    def held(self) -> dict[str, float]:
        """User -> GPUs they hold outside the queue now."""
        out: dict[str, float] = {}
        for user, gpus, _ in self.live.values():
            out[user] = out.get(user, 0.0) + gpus
        return out

    def usage(self, now: float, half_life: float) -> dict[str, float]:
        """User -> decayed GPU-seconds of the claims still held (so far)."""
        out: dict[str, float] = {}
        for user, gpus, since in self.live.values():
            out[user] = out.get(user, 0.0) + accrued(gpus, since, now, now, half_life)
        return out
