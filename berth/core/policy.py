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
                a job's urgency grows as it waits, faster for
                short jobs, so short jobs go first and every job's
                turn comes (a job without a limit counts as 1 day)
guarded         priority, then the overdue job (the oldest, once   reserves GPUs (EASY)
(the default)   the work queued after it is 1.6x the work left,
                1.3x once it waited twice the longest wait of a
                started job: :mod:`berth.core.guard`), then
                GPU-area (time limit x GPUs, smaller first; no
                limit = 1 day), queue time
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
unless the admin allows it). Such a job waits with ``Reservation``, and the first such job (or
one that does not fit) is the head: it takes the EASY reservation, sought on the GPUs it may
use as the windows open and close (under ``fifo`` too: it blocks nobody, as blocking every job
would keep the holders off their own GPUs).

Time limits are not the core's to enforce: a job's supervisor ends its attempt at its limit
(the daemon's overdue watch, ``daemon/procs/overdue.py``, one whose supervisor does not), the
simulator runs a job at most its limit. ``Decisions.wakeup`` includes the next time limit.
"""

from __future__ import annotations

from berth.core.inputs import DEFAULT_PLACEMENT as DEFAULT_PLACEMENT
from berth.core.inputs import DEFAULT_POLICY as DEFAULT_POLICY
from berth.core.inputs import Inputs as Inputs
from berth.core.order import order_key as order_key
from berth.core.placement import PLACEMENTS
from berth.core.schedpass import Pass
from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.core.decisions import Decisions

POLICIES = ("fifo", "fifo-backfill", "priority", "sjf", "fairshare", "balanced", "guarded")


def check_policy(policy: str, placement: str = DEFAULT_PLACEMENT) -> None:
    """Raise UsageError for an unknown policy or placement name."""
    if policy not in POLICIES:
        raise UsageError(f"unknown policy {policy!r}: use one of {', '.join(POLICIES)}")
    if placement not in PLACEMENTS:
        raise UsageError(f"unknown placement {placement!r}: use one of {', '.join(PLACEMENTS)}")


def schedule(inputs: Inputs) -> Decisions:
    """Decide what starts now. Pure: reads its inputs, changes nothing (but
    ``inputs.capacity``, handed over for that). The pass in parts: :mod:`berth.core.schedpass`."""
    check_policy(inputs.policy, inputs.placement)
    return Pass(inputs).run()
