"""The host's claim ledger: who holds which GPU (whole or a share), crash-safe and shared by
all users. See docs/claims.md.

- :class:`berth.claims.ledger.Ledger` -- ``scan()`` the living claims and waiters,
  ``try_claim(uuids, share=, mem=)`` and ``claim(gpus, share, mem)`` (never wait, for anybody:
  the ledger has no lock; see :mod:`berth.claims.verify`);
- :func:`berth.claims.waiting.wait_claim` -- claim, waiting fairly for GPUs if need be;
- :class:`berth.claims.ledger.Claim` -- GPUs claimed: ``fds``, ``release()``, ``detach()``.
"""

from __future__ import annotations

from berth.claims.ledger import Ledger
from berth.claims.paths import claims_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from berth.config import Config
    from berth.selection.choose import Claimed

__all__ = ["held_by_uuid"]


def held_by_uuid(cfg: Config | None = None) -> Mapping[str, Claimed]:
    """GPU uuid -> what living berth claims hold on it (for ``berth select``/``status``).

    Waiters' reservations are not included: ``berth select`` only picks, it takes nothing."""
    path = claims_dir(cfg, create=False)
    return Ledger(path).scan().held()
