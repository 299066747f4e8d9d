"""Which living claims of one GPU stand (are *granted*): the ledger's rule, as a pure function.

A claim made through the ledger creates its file and then checks that it fits next to every
living claim, withdrawing if not (:mod:`berth.claims.verify`). A user can skip that check:
write a claim file by hand (the format is no secret), hold it, and use a GPU that others
hold. Such a claim is not granted: a claim stands only if it fits (shares sum to at most 1,
declared memory to at most the card's, as :func:`berth.claims.verify.conflicts` counts)
together with the claims standing that were *placed before it*.

"Placed" is what the kernel vouches for and no user can set back: the claim file's ctime. The
rename (or link) that puts a file in place sets it; a user can move their own file's ctime
forward (chmod, rename), never back, and cannot touch another user's file in the sticky
ledger directory (with ``fs.protected_hardlinks``, the default, not even link it; the judge
keeps the earliest ctime it saw of each file, so a later bump does not move a claim back in
line). A claim that passed the check fitted next to every claim living when it listed them,
which includes every claim placed before it: it always stands. What cannot be ordered is
judged conservatively:

- claims placed in the same clock tick (equal ctimes, and first seen by the same look) are
  one *tie*: each stands only if it fits with the whole tie, unless ``proper`` (made through
  the ledger by the judge itself, the daemon's jobs' claims: it checked them, so a tied
  claim it did not see was placed after its look), which go first;
- a claim may use the capacity of an earlier claim it nests in (``within``: of its own user
  and held by one of its holders, as ``$BERTH_LEASE``'s is, which the check skips too).

Only claims that stand count against later ones: what is not granted grants nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

EPSILON = 1e-9  # shares are sums of thousandths (the file names'): room for rounding only


@dataclass(frozen=True, slots=True)
class Placed:
    """One living claim of one GPU, as the judge saw it."""

    key: str  # its name in reasons ("claim 3fa2c1d0e4b5", "job 12")
    placed: int  # the earliest ctime (ns) seen of its file
    share: float
    mem: int  # declared memory (bytes; 0: none declared)
    seen: int = 0  # the judge's look that first saw it (a later look's was not there yet)
    proper: bool = False  # made through the ledger by the judge itself: first in a tie
    within: frozenset[str] = frozenset()  # earlier claims whose capacity it may use

    def what(self) -> str:
        """How a reason names it: "job 12's exclusive claim", "claim X's 0.5 share"."""
        if self.share >= 1.0 - EPSILON:
            return f"{self.key}'s exclusive claim"
        mem = f" ({self.mem / (1 << 30):.1f} GiB)" if self.mem else ""
        return f"{self.key}'s {self.share:g} share{mem}"


def stand(claims: Sequence[Placed], total: int | None) -> dict[str, str | None]:
    """Each claim's key -> None if it stands on this GPU, or why it is not granted
    ("placed after job 12's exclusive claim"); ``total``: the card's memory (None: unknown,
    memory is then not judged)."""
    out: dict[str, str | None] = {}
    standing: list[Placed] = []
    ordered = sorted(claims, key=lambda c: (c.placed, c.seen, not c.proper, c.key))
    i = 0
    while i < len(ordered):
        first = ordered[i]
        tie = [c for c in ordered[i:] if (c.placed, c.seen, c.proper) == _moment(first)]
        i += len(tie)
        stood = []
        for c in tie:
            before = [s for s in standing if s.key not in c.within]
            tied = [t for t in tie if t is not c and t.key not in c.within]
            why = _overfills(c, before, tied, total)
            out[c.key] = why
            if why is None:
                stood.append(c)
        standing.extend(stood)
    return out


def _moment(c: Placed) -> tuple[int, int, bool]:
    return (c.placed, c.seen, c.proper)


def _overfills(
    c: Placed, before: list[Placed], tied: list[Placed], total: int | None
) -> str | None:
    """Why ``c`` does not fit after ``before`` and with ``tied`` (None: it fits)."""
    share = c.share + sum(o.share for o in (*before, *tied))
    mem = c.mem + sum(o.mem for o in (*before, *tied))
    over_mem = bool(c.mem) and total is not None and mem > total
    if share <= 1.0 + EPSILON and not over_mem:
        return None
    if not before and not tied:
        return f"declares {c.mem / (1 << 30):.1f} GiB, more than the card's " + (
            f"{(total or 0) / (1 << 30):.1f} GiB"
        )
    parts = []
    if before:
        parts.append("placed after " + _listed(before))
    if tied:
        parts.append("placed at the same moment as " + _listed(tied))
    what = "memory" if share <= 1.0 + EPSILON else "shares"
    return f"{' and '.join(parts)}: together they overfill the GPU ({what})"


def _listed(claims: list[Placed]) -> str:
    names = [c.what() for c in claims]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
