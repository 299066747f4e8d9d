"""``schedule(Inputs(...))``: one pure pass from (jobs, inventory, outside usage, paused GPUs,
now), gathered in one :class:`Inputs` record, to decisions. The daemon and the simulator both
call it; nothing else decides what starts. The pass runs in named steps (charge, gate, place,
reserve): :mod:`berth.core.schedpass`; where a request fits: :mod:`berth.core.fits`.

Policies (the order jobs are considered in, and what a blocked job blocks):

==============  =================================================  ==========================
name            order                                              a job that does not fit
==============  =================================================  ==========================
fifo            queue time                                         blocks every job after it
fifo-backfill   queue time                                         reserves GPUs (EASY)
priority        priority (higher first), then queue time           reserves GPUs (EASY)
sjf             time limit (shorter first; none = last), then      reserves GPUs (EASY)
                priority, queue time
fairshare       tenant holding the fewest GPUs (plus ``usage``),   reserves GPUs (EASY)
                then priority, queue time
balanced        priority, then urgency = wait / sqrt(time limit):  reserves GPUs (EASY)
(the default)   a job's urgency grows as it waits, faster for
                short jobs, so short jobs go first and every job's
                turn comes (a job without a limit counts as 1 day)
==============  =================================================  ==========================

Fair share (``fair=``, :mod:`berth.core.fairshare`), over any policy: between users, the
lowest decayed usage per share first; within a user, the policy's order. Per-user limits
(``limits=``, :mod:`berth.core.limits`): a job that would take its user above their GPU
limit (each GPU they hold any share of counting whole) waits (``UserGpuLimit``), with no
reservation; so does one that would take its project
above its project's (``limits.projects``: ``ProjectGpuLimit``).

In every policy a requeued job (``--requeue`` at its time limit, or preempted) comes after every
job that was waiting when it was preempted (:mod:`berth.core.order`).

EASY backfill: the first job that does not fit gets a *reservation*: the GPUs it will get and
the time it is expected to start (``shadow``), found by releasing running jobs in order of
their expected end (start + time limit). A later job may start if it fits on GPUs outside the
reservation, or if it will end (by its own time limit) before the shadow time. Running jobs
without a time limit have an unknown end: then the reservation has no expected time and its
GPUs are simply kept for the blocked job, while jobs that fit elsewhere go ahead. So no job
starves, and no GPU idles that the blocked job could not use anyway.

Admin reservations (``reservations=``, :mod:`berth.core.reservations`): GPUs kept for a
user, group or project over a time window; only the holders' jobs start there during it,
others' before it only if their time limit ends by its start (a job without one: never,
unless the admin allows it). Such a job waits with ``Reservation``, and takes no EASY
reservation.

Time limits are not the core's to enforce: a job's supervisor ends its attempt at its limit
(the daemon's overdue watch, ``daemon/procs/overdue.py``, one whose supervisor does not), the
simulator runs a job at most its limit. ``Decisions.wakeup`` includes the next time limit.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import NamedTuple

from berth.core.capacity import Capacity
from berth.core.decisions import Decisions
from berth.core.fairshare import FairShare
from berth.core.inventory import Gpu, Node, Usage
from berth.core.job import Job
from berth.core.limits import UserLimits
from berth.core.order import order_key as order_key
from berth.core.placement import PLACEMENTS, Profile
from berth.core.reservations import Window
from berth.core.schedpass import Pass
from berth.core.states import State
from berth.errors import UsageError

POLICIES = ("fifo", "fifo-backfill", "priority", "sjf", "fairshare", "balanced")
DEFAULT_POLICY = "balanced"
DEFAULT_PLACEMENT = "packer"


def check_policy(policy: str, placement: str = DEFAULT_PLACEMENT) -> None:
    """Raise UsageError for an unknown policy or placement name."""
    if policy not in POLICIES:
        raise UsageError(f"unknown policy {policy!r}: use one of {', '.join(POLICIES)}")
    if placement not in PLACEMENTS:
        raise UsageError(f"unknown placement {placement!r}: use one of {', '.join(PLACEMENTS)}")


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
    predicted: Callable[[Job], float | None] | None = None


def schedule(inputs: Inputs) -> Decisions:
    """Decide what starts now. Pure: reads its inputs, changes nothing (but
    ``inputs.capacity``, handed over for that). The pass in parts: :mod:`berth.core.schedpass`."""
    check_policy(inputs.policy, inputs.placement)
    return Pass(inputs).run()
