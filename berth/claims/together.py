"""Several claims made together: all their files made, then ONE look at the ledger checks
them all (:func:`berth.claims.verify.conflicts_each`), where :meth:`Ledger.claim
<berth.claims.ledger.Ledger.claim>` looks once per claim. The daemon makes the claims of one
scheduling pass's starts so: a burst of starts lists and parses the ledger once, not once a
job.

Each claim stands or withdraws alone (all its GPUs or none), as if it had been made by
:meth:`~berth.claims.ledger.Ledger.claim` after the others: it counts them (their files
exist), so two of them that together overfill a GPU both withdraw, as two claimers would.
Nothing about what makes a claim safe changes: every file is made (locked, then named)
before the look, so a claimer elsewhere that listed after us saw ours, and one we did not
see saw ours when it looked (:mod:`berth.claims.verify`). A claim that withdraws leaves
nothing; its caller may look again.
"""

from __future__ import annotations

from berth.claims.verify import conflicts_each

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Sequence
    from typing import Protocol

    from berth.claims.claim import Claim
    from berth.devices.model import GpuSnapshot

    class Claimer(Protocol):  # (the ledger, as this module uses it: no import of it)
        path: str

        def check_claimable(self) -> None: ...

        def _create(
            self, pairs: list[tuple[str, int | None]], share: float, mem: int | None, *,
            label: str | None, command: str | None, pids: Iterable[int],
        ) -> Claim: ...  # fmt: skip

        def _names_locked(self, clean: bool = False) -> dict[str, int]: ...

        def _looked_at(self, names: dict[str, int]) -> tuple[dict[str, int], Collection[str]]: ...

        def parse_claim(self, name: str) -> tuple[str, str, float, int] | None: ...


class Want:
    """One claim to make: these GPUs, a share of each, declared memory, its body's label and
    command (see :meth:`berth.claims.ledger.Ledger.claim`)."""

    __slots__ = ("chosen", "command", "label", "mem", "share")

    def __init__(
        self, chosen: Sequence[GpuSnapshot], share: float, mem: int | None, *,
        label: str | None = None, command: str | None = None,
    ) -> None:  # fmt: skip
        self.chosen, self.share, self.mem = chosen, share, mem
        self.label, self.command = label, command


def claim_each(ledger: Claimer, wants: Sequence[Want]) -> list[Claim | None]:
    """Claim each of ``wants`` (all its GPUs or none), checked together: one ``Claim`` or
    None (it did not fit beside the living claims; nothing of it is left) each, in order.
    Never waits. Raises Refused if this process may not claim here, OSError if files cannot
    be made (then none of them stands)."""
    if not wants:
        return []
    ledger.check_claimable()
    made: list[Claim] = []
    totals: dict[str, int | None] = {}
    try:
        for w in wants:
            pairs: list[tuple[str, int | None]] = [(g.uuid, g.index) for g in w.chosen]
            for g in w.chosen:
                totals[g.uuid] = g.memory_total
            made.append(
                ledger._create(pairs, w.share, w.mem, label=w.label, command=w.command, pids=())
            )  # fmt: skip
        # (/proc/locks, or the kept listing, read after every file of them was made)
        names = ledger._names_locked()
        looked = ledger._looked_at(names)[1]
        why = conflicts_each(ledger.path, made, totals, (), looked, names, ledger.parse_claim)
    except BaseException:
        for claim in made:
            claim.release()
        raise
    out: list[Claim | None] = []
    for claim, reason in zip(made, why, strict=True):
        if reason is not None:
            claim.release()
            out.append(None)
        else:
            out.append(claim)
    return out
