"""``--array 0-9%2`` read as sbatch reads it: task indices and an optional throttle.

One parser for the Slurm backend and the daemon (the job spec's ``array`` field,
:mod:`berth.wire.jobspec`); standard library only.
"""

from __future__ import annotations

from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

MAX_ARRAY_INDEX = 1_000_000


class ArraySpec:
    """``--array 0-9%2``: task indices (ranges, steps, lists: ``1,3,5-7``, ``0-15:4``) and an
    optional throttle (at most that many tasks run at once), as sbatch reads them."""

    __slots__ = ("indices", "text", "throttle")

    def __init__(self, indices: Sequence[int], throttle: int | None, text: str) -> None:
        self.indices = tuple(indices)
        self.throttle = throttle
        self.text = text  # normalised: what sbatch is given

    @classmethod
    def parse(cls, text: str) -> ArraySpec:
        def bad(why: str) -> UsageError:
            return UsageError(
                f"invalid --array {text!r}: {why}; use indices like 0-9, 1,3,5 or 0-15:4, "
                "optionally with %N to run at most N at once (0-9%2)"
            )

        body, pct, throttle_text = text.strip().partition("%")
        throttle = None
        if pct:
            if not throttle_text.isdigit() or int(throttle_text) < 1:
                raise bad(f"the throttle {throttle_text!r} must be a positive integer")
            throttle = int(throttle_text)
        indices: set[int] = set()
        parts = []
        for part in body.split(","):
            part = part.strip()
            span, colon, step_text = part.partition(":")
            lo_text, dash, hi_text = span.partition("-")
            if not lo_text.isdigit() or (dash and not hi_text.isdigit()):
                raise bad(f"{part!r} is not an index or a range")
            lo = int(lo_text)
            hi = int(hi_text) if dash else lo
            step = 1
            if colon:
                if not dash or not step_text.isdigit() or int(step_text) < 1:
                    raise bad(f"{part!r}: a step (:N) needs a range and a positive N")
                step = int(step_text)
            if hi < lo:
                raise bad(f"{part!r} ends before it starts")
            if hi > MAX_ARRAY_INDEX:
                raise bad(f"index {hi} is too large (at most {MAX_ARRAY_INDEX})")
            indices.update(range(lo, hi + 1, step))
            parts.append(f"{lo}-{hi}" + (f":{step}" if step != 1 else "") if dash else str(lo))
        return cls(sorted(indices), throttle, ",".join(parts) + (f"%{throttle}" if pct else ""))

    def __repr__(self) -> str:
        return f"ArraySpec({self.text!r})"
