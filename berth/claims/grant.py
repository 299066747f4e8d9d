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

import itertools
from dataclasses import dataclass

from berth.units import format_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

MOST = 3  # claims a reason names (then "and N more")
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
        mem = f" ({format_size(self.mem)})" if self.mem else ""
        return f"{self.key}'s {self.share:g} share{mem}"


def stand(claims: Sequence[Placed], total: int | None) -> dict[str, str | None]:
    """Each claim's key -> None if it stands on this GPU, or why it is not granted
    ("placed after job 12's exclusive claim"); ``total``: the card's memory (None: unknown,
    memory is then not judged). Linear in the claims and their ``within`` (a user's planted
    files cost each look little)."""
    out: dict[str, str | None] = {}
    standing: dict[str, Placed] = {}
    share, mem = 0.0, 0  # what the standing claims hold together
    ordered = sorted(claims, key=lambda c: (*_moment(c), c.key))
    i = 0
    while i < len(ordered):
        j = i
        while j < len(ordered) and _moment(ordered[j]) == _moment(ordered[i]):
            j += 1
        tie = {c.key: c for c in ordered[i:j]}
        i = j
        tie_share, tie_mem = sum(c.share for c in tie.values()), sum(c.mem for c in tie.values())
        stood = []
        for c in tie.values():
            skip = [o for k in c.within if (o := standing.get(k) or tie.get(k)) and o is not c]
            s = share + tie_share - sum(o.share for o in skip)
            m = mem + tie_mem - sum(o.mem for o in skip)
            if s <= 1.0 + EPSILON and not (c.mem and total is not None and m > total):
                out[c.key] = None
                stood.append(c)
                continue
            within = {o.key for o in skip} | {c.key}
            before = _first(standing, within)
            tied = _first(tie, within)
            out[c.key] = _why(c, before, tied, total, "shares" if s > 1.0 + EPSILON else "memory")
        for c in stood:
            standing[c.key] = c
            share, mem = share + c.share, mem + c.mem
    return out


def _moment(c: Placed) -> tuple[int, int, bool]:
    """When it was placed, as far as the judge can tell (the daemon's own first in a tie)."""
    return (c.placed, c.seen, not c.proper)


def _first(claims: dict[str, Placed], but: set[str]) -> tuple[list[Placed], int]:
    """The first few of ``claims`` (but those of ``but``) to name, and how many there are."""
    named = list(itertools.islice((o for k, o in claims.items() if k not in but), MOST))
    return named, len(claims) - len(but & claims.keys())


def _why(
    c: Placed,
    before: tuple[list[Placed], int],
    tied: tuple[list[Placed], int],
    total: int | None,
    what: str,
) -> str:
    if not before[1] and not tied[1]:
        return f"declares {format_size(c.mem)}, more than the card's {format_size(total)}"
    parts = []
    if before[1]:
        parts.append("placed after " + _listed(before))
    if tied[1]:
        parts.append("placed at the same moment as " + _listed(tied))
    return f"{' and '.join(parts)}: together they overfill the GPU ({what})"


def _listed(claims: tuple[list[Placed], int]) -> str:
    named, count = claims
    names = [c.what() for c in named]
    if count > len(named):
        return ", ".join(names) + f" and {count - len(named)} more"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
