"""What a scheduling pass decides. The daemon applies these; the simulator replays them."""

from __future__ import annotations

from dataclasses import dataclass, field

from berth.core.states import Reason


@dataclass(frozen=True, slots=True)
class Start:
    """Start ``job_id`` on ``gpus`` (indices) with ``share`` of each and ``mem`` bytes of GPU
    memory charged per GPU (what the claim should declare); ``node`` is "" on a single host."""

    job_id: int
    gpus: tuple[int, ...]
    share: float
    mem: int | None
    node: str = ""


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel a pending job that can never run (a failed ``afterok`` dependency)."""

    job_id: int
    reason: str


@dataclass(frozen=True, slots=True)
class Pending:
    """Why a pending job waits: ``reason`` (Slurm's word) and a human ``detail``."""

    job_id: int
    reason: Reason
    detail: str = ""

    def __str__(self) -> str:
        return f"({self.reason.value})" + (f" {self.detail}" if self.detail else "")


@dataclass(slots=True)
class Decisions:
    """One pass's result. ``pending`` has an entry for every pending job not started (when the
    pass was asked to explain; a run of tasks that wait alike, :mod:`berth.core.alike`, share
    their first's entry, whose ``job_id`` is that first's); ``expected`` the predicted start of the blocked head job (its
    reservation); ``wakeup`` the earliest future time at which a pass could decide something new
    without any event (a retry backoff ending, a time limit reached), or None."""

    starts: list[Start] = field(default_factory=list)
    cancels: list[Cancel] = field(default_factory=list)
    pending: dict[int, Pending] = field(default_factory=dict)
    expected: dict[int, float] = field(default_factory=dict)
    wakeup: float | None = None
    order: list[int] = field(default_factory=list)  # explain: pending jobs as considered
    partial: bool = False  # the pass ended early (``Inputs.explain_stop``): ``order`` is a prefix

    def wake_at(self, t: float) -> None:
        """A pass could decide something new at ``t``: the earliest such time is kept."""
        if self.wakeup is None or t < self.wakeup:
            self.wakeup = t
