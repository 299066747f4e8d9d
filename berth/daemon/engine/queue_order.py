"""The queue in the policy's order, kept between scheduling passes.

A pass over a long queue must not sort it every time, nor after every change.

- ``balanced`` (its order ages with the clock): the pending jobs are kept in a
  :class:`berth.core.ranking.Ranking` (groups of one priority and similar limits, each by
  queue time), which ``core.schedule`` walks lazily and exactly at the pass's ``now``: a job
  that joins is added to its group, one that leaves is dropped from it, and a pass pays for
  the jobs it looks at, not for the queue. A job that rejoins the queue (requeued, retried)
  or a commit that failed rebuilds the ranking (rare: its old entry would still be there).
- ``guarded`` (the default; its order does not age): kept the same way, in a static
  :class:`~berth.core.ranking.Ranking` (bisected in, pruned as jobs leave), which also
  keeps the jobs by queue time and the work they ask: the overdue job's search
  (:mod:`berth.core.guard`) reads those, not a sort of the queue, and a pass with every
  GPU taken counts the jobs asking no GPU, as ``balanced``'s does.
- the other orders (which do not age): re-sorted only when jobs joined the queue (new,
  requeued, retried: the order of the others does not change). Jobs that leave the queue
  (started, cancelled) are dropped from the sorted list as they are met: those that started
  are nearly always at its head, so the engine counts them and a full filter runs only if
  some left from elsewhere.

The packer's demand profile (``Profile.of`` the pending requests: as costly as a sort) is
renewed when the queue is short, or when it grew or shrank by an eighth since the last
profile (or a minute passed): a job more or less in a long queue does not change the demand
distribution it describes. It is built (``Profile.later``, of the queue as it was then) only
once a placement has a choice to make: a pass that starts a job on the one GPU free never
builds it.
"""

from __future__ import annotations

from berth.core.guard import Arrivals
from berth.core.placement import Profile
from berth.core.policy import order_key
from berth.core.ranking import Ranking
from berth.core.states import State

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from berth.core.job import Job

#: The orders kept in a :class:`~berth.core.ranking.Ranking` between passes (each change
#: added or pruned, not re-sorted): guarded's is static (bisected in), balanced's ages.
RANKED = ("balanced", "guarded")
SHORT = 2048  # a queue this short: its profile is rebuilt at every change
PROFILE_AGE = 60.0  # seconds: a long queue's profile is rebuilt at least this often


class QueueOrder:
    def __init__(self) -> None:
        self.dirty = True  # a job joined (or rejoined) the queue: re-sort (or rebuild)
        self.arrivals = Arrivals()  # the work that joined the queue (core.guard, guarded)
        self._left = 0  # jobs of the sorted list that left PENDING since it was filtered
        self._sorted: list[Job] = []
        self.presorted = False  # (what the pass may tell core.schedule)
        self.profile: Profile | None = None  # the demand waiting (see the module)
        self.tenants = 0  # users with pending jobs
        self._ranking: Ranking | None = None  # balanced: the pending jobs
        self._policy = ""
        # balanced: ids of jobs that left the ranking since it was built (their entries may
        # linger in it until it compacts, so one that rejoins rebuilds it); the jobs in it are
        # its ``where`` (no copy of the queue kept here)
        self._gone: set[int] = set()
        self._tenants: dict[str, int] = {}  # balanced: pending jobs per tenant
        self._profile_n = -1  # pending jobs when the profile was built
        self._profile_at = 0.0
        self._changed = True  # balanced: the queue changed since the profile

    def joined(self, job: Job | None = None) -> None:
        """``job`` joined (or rejoined) the queue; None: the queue changed otherwise."""
        if job is not None and self._policy in ("", "guarded"):  # (only guarded reads it)
            self.arrivals.add(job)  # (guarded's record; a start undone is left out)
        ranking = self._ranking
        if job is None or ranking is None or job.id in self._gone or ranking.has(job):
            self.dirty = True
            return
        self._add(ranking, job)

    def left(self, job: Job | None = None) -> None:
        """A pending job (``job``) left the queue."""
        self._left += 1
        if self._ranking is not None and job is not None and self._ranking.has(job):
            self._ranking.prune([job])
            self._gone.add(job.id)
            self._tenant(job, -1)
            self._changed = True

    def left_all(self, jobs: list[Job]) -> None:
        """Pending ``jobs`` left the queue at once (a bulk cancel): pruned from the ranking,
        or, when they are half of it or more, the ranking rebuilt at the next pass from the
        jobs that remain (cheaper than pruning each)."""
        ranking = self._ranking
        if ranking is not None and len(jobs) * 2 >= len(ranking):
            self.dirty = True
            self._left += len(jobs)
            return
        for job in jobs:
            self.left(job)

    def counted_without_gpu(self) -> bool | None:
        """Whether some pending job asks no GPU (-g 0), from the count the ranking keeps;
        None when that is not known without a walk of the queue (no ranking, or one to
        rebuild)."""
        ranking = self._ranking
        if ranking is None or self.dirty or self._policy not in RANKED:
            return None
        return ranking.no_gpu > 0

    def waits_without_gpu(self, jobs: Callable[[], Iterable[Job]]) -> bool:
        """Whether some pending job of ``jobs()`` (all of them) asks no GPU: counted, or
        else found by a walk (only then is ``jobs`` called)."""
        known = self.counted_without_gpu()
        if known is not None:
            return known
        return any(j.request.gpus == 0 for j in jobs() if j.state is State.PENDING)

    def pending(self, jobs: Iterable[Job], policy: str, now: float) -> Sequence[Job]:
        """The pending jobs of ``jobs`` in ``policy``'s order at ``now``."""
        if policy in RANKED:
            return self._ranked(jobs, policy, now)
        self._ranking = None
        if self.dirty or policy != self._policy:
            self._policy = policy
            self.dirty = False
            self._left = 0
            self._sorted = sorted(
                (j for j in jobs if j.state is State.PENDING),
                key=lambda j: order_key(j, policy, now),
            )
            # fair share orders users only when several wait (jobs leaving cannot add one)
            self.tenants = len({j.tenant for j in self._sorted})
            self.profile = Profile.later([j.request for j in self._sorted])
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

    def _ranked(self, jobs: Iterable[Job], policy: str, now: float) -> Sequence[Job]:
        ranking = self._ranking
        if (
            ranking is None
            or self.dirty
            or self._policy != policy
            or not (ranking.where or ranking.jobs)
        ):
            self._policy = policy
            self.dirty = False
            ranking = self._ranking = Ranking(policy)
            self._gone.clear()
            self._tenants.clear()
            for j in jobs:
                if j.state is State.PENDING:
                    self._add(ranking, j)
        self._left = 0
        self.presorted = True
        self.tenants = len(self._tenants)
        n = len(ranking)
        if self._changed and (
            n < SHORT
            or self._profile_n < SHORT  # (one that lists the ranking when read: not stale)
            or abs(n - self._profile_n) * 8 > max(self._profile_n, 1)
            or now - self._profile_at > PROFILE_AGE
        ):
            # A short queue's is renewed at every change, so it may list the ranking when it
            # is first read (a pass whose placements have no choice never lists it); a long
            # one's may be kept while the queue changes, so it lists the queue of now.
            self.profile = Profile.later(
                ranking.requests if n < SHORT else ranking.requests(),
                constrained=ranking.restricted > 0,
            )
            self._profile_n, self._profile_at, self._changed = n, now, False
        return ranking.at(now)

    def _add(self, ranking: Ranking, job: Job) -> None:
        ranking.add(job)
        self._tenant(job, 1)
        self._changed = True

    def _tenant(self, job: Job, d: int) -> None:
        n = self._tenants.get(job.tenant, 0) + d
        if n > 0:
            self._tenants[job.tenant] = n
        else:
            self._tenants.pop(job.tenant, None)
