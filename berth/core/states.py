"""Job states, their Slurm short codes (``berth/state_codes.py``'s table), their groupings,
and the pending reasons.

Depends on nothing but that table. The only function allowed to move a job between states is
:func:`berth.core.transition.transition`; this module only says which moves are legal.
"""

from __future__ import annotations

from enum import Enum

from berth.state_codes import CODES as _BY_NAME


class State(str, Enum):
    """Where a job is. ``str`` subclass, so ``State.RUNNING == "RUNNING"`` and JSON is plain."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    PREEMPTED = "PREEMPTED"
    LOST = "LOST"

    @property
    def code(self) -> str:
        """Slurm's two-letter code: PD R CG CD F CA TO PR LO."""
        return CODES[self]

    @property
    def finished(self) -> bool:
        return self in FINISHED

    @classmethod
    def parse(cls, text: str) -> State:
        """``"PD"``, ``"pending"``, ``"PENDING"`` -> State.PENDING. Raises ValueError."""
        key = text.strip().upper()
        for state, code in CODES.items():
            if key in (state.value, code):
                return state
        known = ", ".join(f"{s.value} ({c})" for s, c in CODES.items())
        raise ValueError(f"unknown job state {text!r}; known: {known}")

    def __str__(self) -> str:
        return self.value


CODES: dict[State, str] = {State(name): code for name, code in _BY_NAME.items()}

#: A job holding GPUs (its current attempt has them).
ACTIVE: frozenset[State] = frozenset({State.RUNNING, State.COMPLETING})
#: Final job states. PREEMPTED is not among them: a preempted job is requeued (PENDING again,
#: with a new attempt to come); PREEMPTED is the outcome of the attempt it ended.
FINISHED: frozenset[State] = frozenset(
    {State.COMPLETED, State.FAILED, State.CANCELLED, State.TIMEOUT, State.LOST}
)
#: What an attempt can end as.
OUTCOMES: frozenset[State] = FINISHED | {State.PREEMPTED}

#: The legal moves. A move to FAILED / TIMEOUT / PREEMPTED may land the job in PENDING again
#: (retry, requeue): see ``transition``.
ALLOWED: dict[State, frozenset[State]] = {
    State.PENDING: frozenset({State.RUNNING, State.CANCELLED}),
    State.RUNNING: frozenset({State.COMPLETING} | OUTCOMES),
    State.COMPLETING: OUTCOMES,
    **{s: frozenset() for s in FINISHED},
    State.PREEMPTED: frozenset(),  # never a job's resting state
}


class Reason(str, Enum):
    """Why a pending job is not running (shown as ``(Resources)`` in ``berth queue``)."""

    NONE = "None"  # being started in this very pass
    RESOURCES = "Resources"  # next in line, but its GPUs are not free
    PRIORITY = "Priority"  # would fit, but a job ahead of it holds the reservation
    DEPENDENCY = "Dependency"  # waits for another job
    DEPENDENCY_NEVER = "DependencyNeverSatisfied"  # a dependency can no longer be met
    HELD = "Held"  # `berth hold`; `berth release-job` lets it go
    GPU_PAUSED = "GpuPaused"  # every GPU it may use is paused (drained)
    GPU_UNHEALTHY = "GpuUnhealthy"  # it needs GPUs the driver reports lost or failing
    BEGIN_TIME = "BeginTime"  # retry backoff: not before a given time
    BAD_CONSTRAINTS = "BadConstraints"  # no GPU of this machine can ever satisfy the request
    ARRAY_TASK_LIMIT = "JobArrayTaskLimit"  # its group (an array's %K) runs all it may at once
    USER_GPU_LIMIT = "UserGpuLimit"  # its user holds all the GPUs they may at once
    RESERVATION = "Reservation"  # it would fit but for GPUs an admin reserved for others
    PROJECT_GPU_LIMIT = "ProjectGpuLimit"  # its project holds all the GPUs it may at once
    STATE_DISK_FULL = "StateDiskFull"  # its start could not be recorded: the disk is full
    STATE_UNWRITABLE = "StateUnwritable"  # its start could not be recorded: another error
    SYSTEM_LIMIT = "SystemLimit"  # its start met a limit: no descriptor, memory, process left

    def __str__(self) -> str:
        return self.value
