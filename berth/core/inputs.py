"""What one scheduling pass reads: :class:`Inputs`, the record :func:`berth.core.policy.schedule`
takes (and the pass, :mod:`berth.core.schedpass`, reads), with the defaults of its policy
and placement. A module of its own: the pass names it, and the policy runs the pass.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import NamedTuple

from berth.core.capacity import Capacity
from berth.core.fairshare import FairShare
from berth.core.guard import Arrivals
from berth.core.inventory import Gpu, Node, Usage
from berth.core.job import Job
from berth.core.limits import UserLimits
from berth.core.placement import Profile
from berth.core.reservations import Window
from berth.core.states import State

DEFAULT_POLICY = "guarded"
DEFAULT_PLACEMENT = "packer"


class Inputs(NamedTuple):
    """Everything one scheduling pass reads: a frozen record, a NamedTuple because the
    simulator builds one per pass (a frozen dataclass costs three times as much to build).
    Give the fields after ``now`` by name; ``schedule`` refuses an unknown ``policy`` or
    ``placement`` (UsageError).

    - ``pending``: PENDING jobs; ``running``: RUNNING/COMPLETING jobs (their current attempt
      holds ``gpus``/``share``/``mem``).
    - ``inventory``: the GPUs; ``nodes``: node CPU/RAM (simulated clusters only).
    - ``others``: per GPU index, what holders other than these jobs use (claims of daemonless
      users, processes outside berth). Never include the scheduler's own jobs there.
    - ``paused``: GPU indices drained: nothing new starts there.
    - ``done``: states of finished jobs that dependencies may name.
    - ``profile``: the demand distribution for the ``packer`` (default: the pending requests).
    - ``usage``: fairshare's extra per-tenant usage, in GPUs (e.g. a decayed average held).
    - ``fair``: fair share between users by decayed usage (:mod:`berth.core.fairshare`): users
      ordered by usage per share, each user's jobs in the policy's order.
    - ``limits``: the most GPUs each user, and each project's jobs, may hold at once
      (:mod:`berth.core.limits`).
    - ``explain``: fill ``Decisions.pending`` with a reason for every job not started (the
      simulator turns it off for speed, which also lets the pass stop once nothing fits; the
      jobs after that point then get no ``Cancel`` for a failed dependency and no ``wakeup``
      for their backoff: run an explaining pass when dependencies may have failed).
    - ``presorted``: ``pending`` is already in :func:`order_key` order (the simulator keeps it so,
      :class:`~berth.core.order.Ranking`).
    - ``reservations``: admin reservations (:class:`~berth.core.reservations.Window`): GPUs
      kept for their holders over a time window; others' jobs start there only if their time
      limit ends before it opens (``Reservation`` otherwise); a window's start and end are
      ``Decisions.wakeup`` times.
    - ``capacity``: what the running jobs leave, kept by the caller across passes
      (:class:`~berth.core.occupancy.Occupancy`; the pass changes it): then ``inventory``,
      ``nodes``, ``others`` and ``paused`` are not read and ``running`` is not charged again.
      Only without ``explain`` (explanations name the holders, which it does not record).
    - ``explain_stop``: with ``explain``, a pass may end early: after the first job it
      considers for which this returns True (a caller that shows only the head of the queue:
      `berth queue` on a terminal). The jobs considered until then are decided and explained
      exactly as in a whole pass (a job's fate depends only on the jobs before it); the rest
      get no reason, start, ``Cancel`` or ``wakeup``, and ``Decisions.partial`` is True.
      It must be a pure function of the jobs it is shown (it may count them).
    - ``arrivals``: ``guarded``'s record of the work that joined the queue
      (:class:`~berth.core.guard.Arrivals`); None: the pending and running jobs are counted.
    - ``predicted``: ([scheduling] predict) a job without a time limit -> its predicted run
      seconds from its start, or None (:mod:`berth.core.runtimes`; a running job's
      re-predicted by the caller once it outran it): EASY's shadow time and a backfill's
      "ends before it" read them where a limit is not given. No stop and no wakeup rests on
      them. A pure function of the job, as ``explain_stop``.
    """

    pending: Sequence[Job]
    running: Sequence[Job]
    inventory: Sequence[Gpu]
    others: Mapping[int, Usage] | None = None
    paused: Collection[int] = ()
    now: float = 0.0
    policy: str = DEFAULT_POLICY
    placement: str = DEFAULT_PLACEMENT
    nodes: Mapping[str, Node] | None = None
    done: Mapping[int, State] | None = None
    profile: Profile | None = None
    usage: Mapping[str, float] | None = None
    fair: FairShare | None = None
    limits: UserLimits | None = None
    explain: bool = True
    presorted: bool = False
    capacity: Capacity | None = None
    reservations: Sequence[Window] = ()
    explain_stop: Callable[[Job], bool] | None = None
    arrivals: Arrivals | None = None
    predicted: Callable[[Job], float | None] | None = None
