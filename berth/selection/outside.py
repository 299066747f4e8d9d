"""The host's rule for outside use: when processes outside berth make a GPU unavailable to it.

One rule, one function, one wording, for the daemon (its pending reasons,
:mod:`berth.daemon.engine.resources`) and for choosing GPUs without it (``berth select
--explain``, ``berth.select()``, ``berth run`` and ``berth.acquire()``:
:mod:`berth.selection.reasons`). The admin sets it as the GPU Job Scheduler's
``--mem-threshold`` / ``--load-threshold``::

    [scheduling]
    outside_max_memory = 0.25   # outside processes may use up to a quarter of its memory...
    outside_max_util = 20       # ... at up to 20% utilisation: both must hold

Unset (the default), any process outside berth makes its GPU unavailable to berth's whole-GPU
jobs. Pure: no I/O, no clock.
"""

from __future__ import annotations

from berth.record import Record, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.config import Config

#: The rule's name, as messages give it.
RULE = "[scheduling] outside_max_memory/outside_max_util"


@record
class OutsideRule(Record):
    """``max_memory``: the fraction of a GPU's memory outside processes may use; ``max_util``:
    the GPU's utilisation % they may cause; None: not set. Neither set: any outside process
    makes the GPU unavailable."""

    max_memory: float | None = None
    max_util: float | None = None

    @property
    def configured(self) -> bool:
        """Whether the admin set the rule (else: the default, any outside process)."""
        return self.max_memory is not None or self.max_util is not None

    @classmethod
    def of(cls, cfg: Config) -> OutsideRule:
        return cls(cfg.outside_max_memory, cfg.outside_max_util)


def unavailable(
    rule: OutsideRule, count: int, used: int, memory_total: int | None,
    utilization: float | None,
) -> str | None:  # fmt: skip
    """Why ``count`` processes outside berth, using ``used`` bytes of a GPU of
    ``memory_total`` bytes at ``utilization`` %, make it unavailable to berth (the words of a
    pending reason and of ``berth select --explain``), or None when the rule lets berth use it.
    A reading the driver does not give (None) passes its half of the rule."""
    if count <= 0:
        return None
    words = f"{count} process{'es' if count != 1 else ''} outside berth"
    if not rule.configured:
        return words
    over = []
    most_mem, most_util = rule.max_memory, rule.max_util
    if most_mem is not None and memory_total:
        if used > most_mem * memory_total:
            over.append(f"{used / memory_total:.0%} of its memory > {most_mem:.0%}")
    if most_util is not None and utilization is not None and utilization > most_util:
        over.append(f"{utilization:g}% busy > {most_util:g}%")
    if not over:
        return None
    return f"{words} ({', '.join(over)}: {RULE})"
