"""The queue in the policy's order, kept between scheduling passes.

A pass over a long queue must not sort it every time: the pending jobs are re-sorted only
when jobs joined the queue (new, requeued, retried: the order of the others does not
change), or, for ``balanced`` (whose order ages), at most once a second. Jobs that leave the
queue (started, cancelled) are dropped from the sorted list as they are met: those that
started are nearly always at its head, so the engine counts them (:meth:`QueueOrder.left`)
and a full filter runs only if some left from elsewhere.
"""

from __future__ import annotations

from berth.core.placement import Profile
from berth.core.policy import order_key
from berth.core.states import State

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from berth.core.job import Job


class QueueOrder:
    def __init__(self) -> None:
        self.dirty = True  # a job joined (or rejoined) the queue: re-sort
        self._left = 0  # jobs of the sorted list that left PENDING since it was filtered
        self._sorted: list[Job] = []
        self._sorted_at = 0.0
        self.presorted = False  # (what the pass may tell core.schedule)
        self.profile: Profile | None = None  # the demand waiting at the last sort
        self.tenants = 0  # users with pending jobs at the last sort

    def joined(self) -> None:
        self.dirty = True

    def left(self) -> None:
        """A pending job left the queue."""
        self._left += 1

    def pending(self, jobs: Iterable[Job], policy: str, now: float) -> list[Job]:
        """The pending jobs of ``jobs`` in ``policy``'s order at ``now``."""
        if self.dirty or (policy == "balanced" and now - self._sorted_at > 1.0):
            self.dirty = False
            self._left = 0
            self._sorted_at = now
            self._sorted = sorted(
                (j for j in jobs if j.state is State.PENDING),
                key=lambda j: order_key(j, policy, now),
            )
            # fair share orders users only when several wait (jobs leaving cannot add one)
            self.tenants = len({j.tenant for j in self._sorted})
            self.profile = Profile.of(j.request for j in self._sorted)
            self.presorted = True
            return list(self._sorted)
        order = self._sorted
        k = 0
        while k < len(order) and order[k].state is not State.PENDING:
            k += 1
        if k:
            del order[:k]
        if self._left != k:  # (more left, or some left uncounted: be exact)
            order[:] = [j for j in order if j.state is State.PENDING]
        self._left = 0
        return list(order)
