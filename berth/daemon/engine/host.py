"""The engine as the modules it imports see it: :class:`Host`, what explaining
(:mod:`.explaining`), the start estimates (:mod:`.estimates`) and the enforcer
(:mod:`.enforcer`, :mod:`.idle_holders`) read and call of it. They name this, never the
:class:`~berth.daemon.engine.engine.Engine` class, so no import goes round a loop, not even
one for the type checker (tests/base/test_import_cycles.py). The engine fits it as it is
(checked by the type checker where it hands itself to them).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, ValuesView
    from typing import Protocol

    from berth.claims.claim import Claim
    from berth.core.deps import Finished
    from berth.core.inventory import Usage
    from berth.core.job import Job
    from berth.core.states import State
    from berth.daemon.engine.accounts import Accounts
    from berth.daemon.engine.control import Control
    from berth.daemon.engine.jobtable import JobTable
    from berth.daemon.engine.pauses import Pauses
    from berth.daemon.engine.queue_order import QueueOrder
    from berth.daemon.engine.reservations import Reservations
    from berth.daemon.engine.resources import Resources
    from berth.daemon.options import Options
    from berth.daemon.ports import Clock, LiveAttempt, Processes
    from berth.daemon.store.journal import Journal
    from berth.daemon.store.store import Store

    # What `berth queue` asks explaining to cover: a test of the jobs it shows, made when asked.
    Until = Callable[[], Callable[[Job], bool]]
else:
    Protocol = object


class Backfills(Protocol):
    """The start estimates as a pass reads them (:mod:`.estimates`: ``[scheduling] predict``)."""

    def backfill(self, now: float) -> Callable[[Job], float | None] | None: ...


class Host(Protocol):
    """What the engine's helpers see of it (each uses a few of these)."""

    # its ports and its books
    opts: Options
    store: Store
    res: Resources
    clock: Clock
    procs: Processes
    jobs: JobTable
    runs: dict[int, LiveAttempt]
    committing: dict[int, Claim]
    finished_states: Finished
    journal: Journal
    order: QueueOrder
    accounts: Accounts
    pauses: Pauses
    reservations: Reservations
    control: Control
    # what the last pass (or explaining) said of the pending jobs
    reasons: dict[int, str]
    considered: dict[int, int]
    explained_all: bool
    last_explain_seconds: float

    @property
    def estimates(self) -> Backfills: ...

    def kick(self) -> None: ...

    def flush(self, force: bool = False) -> None: ...

    def live(self, job_id: int) -> Job | None: ...

    def state_of(self, job_id: int) -> State | None: ...

    def unfinished(self) -> ValuesView[Job]: ...

    def outside_usage(self, clean: bool = False) -> dict[int, Usage]: ...

    def _own_pids(self) -> dict[int, tuple[int, ...]]: ...
