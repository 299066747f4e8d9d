"""``schedule()``: one pure pass from (jobs, inventory, outside usage, paused GPUs, now) to
decisions. The daemon and the simulator both call it; nothing else decides what starts.

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
limit waits (``UserGpuLimit``), with no reservation.

In every policy a requeued job (``--requeue`` at its time limit, or preempted) comes after every
job that was waiting when it was preempted (:mod:`berth.core.order`).

EASY backfill: the first job that does not fit gets a *reservation*: the GPUs it will get and
the time it is expected to start (``shadow``), found by releasing running jobs in order of
their expected end (start + time limit). A later job may start if it fits on GPUs outside the
reservation, or if it will end (by its own time limit) before the shadow time. Running jobs
without a time limit have an unknown end: then the reservation has no expected time and its
GPUs are simply kept for the blocked job, while jobs that fit elsewhere go ahead. So no job
starves, and no GPU idles that the blocked job could not use anyway.

Time limits: a running job past its limit gets a ``Stop`` decision (a safety net; the daemon
should also arm a timer at ``Decisions.wakeup``, which includes every deadline).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from berth.core import deps
from berth.core.capacity import EPS, INF, Capacity
from berth.core.decisions import Cancel, Decisions, Pending, Start, Stop
from berth.core.explain import resources_detail, static_reason
from berth.core.fairshare import FairShare, fair_charge
from berth.core.groups import GroupLimits
from berth.core.inventory import Gpu, Node, Usage
from berth.core.job import Job, Request
from berth.core.limits import Held, UserLimits
from berth.core.order import order_key as order_key
from berth.core.order import ordered
from berth.core.placement import PLACEMENTS, Placement, Profile, could_fit, place
from berth.core.ranking import View
from berth.core.states import Reason, State
from berth.errors import UsageError
from berth.units import format_duration

POLICIES = ("fifo", "fifo-backfill", "priority", "sjf", "fairshare", "balanced")
DEFAULT_POLICY = "balanced"
#: Policies whose order depends on ``now`` (the simulator cannot keep them presorted).
DYNAMIC = frozenset({"balanced"})
DEFAULT_PLACEMENT = "packer"


def check_policy(policy: str, placement: str = DEFAULT_PLACEMENT) -> None:
    """Raise UsageError for an unknown policy or placement name."""
    if policy not in POLICIES:
        raise UsageError(f"unknown policy {policy!r}: use one of {', '.join(POLICIES)}")
    if placement not in PLACEMENTS:
        raise UsageError(f"unknown placement {placement!r}: use one of {', '.join(PLACEMENTS)}")


def schedule(
    pending: Sequence[Job],
    running: Sequence[Job],
    inventory: Sequence[Gpu],
    others: Mapping[int, Usage] | None = None,
    paused: Collection[int] = (),
    now: float = 0.0,
    *,
    policy: str = DEFAULT_POLICY,
    placement: str = DEFAULT_PLACEMENT,
    nodes: Mapping[str, Node] | None = None,
    done: Mapping[int, State] | None = None,
    profile: Profile | None = None,
    usage: Mapping[str, float] | None = None,
    fair: FairShare | None = None,
    limits: UserLimits | None = None,
    explain: bool = True,
    presorted: bool = False,
    capacity: Capacity | None = None,
) -> Decisions:
    """Decide what starts now. Pure: reads its arguments, changes nothing.

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
    - ``limits``: the most GPUs each user may hold at once (:mod:`berth.core.limits`).
    - ``explain``: fill ``Decisions.pending`` with a reason for every job not started (the
      simulator turns it off for speed, which also lets the pass stop once nothing fits; the
      jobs after that point then get no ``Cancel`` for a failed dependency and no ``wakeup``
      for their backoff: run an explaining pass when dependencies may have failed).
    - ``presorted``: ``pending`` is already in :func:`order_key` order (the simulator keeps it so,
      :class:`~berth.core.order.Ranking`).
    - ``capacity``: what the running jobs leave, kept by the caller across passes
      (:class:`~berth.core.occupancy.Occupancy`; this pass changes it): then ``inventory``,
      ``nodes``, ``others`` and ``paused`` are not read and ``running`` is not charged again.
      Only without ``explain`` (explanations name the holders, which it does not record).
    """
    check_policy(policy, placement)
    out = Decisions()
    charge = capacity is None or explain
    cap = Capacity(inventory, nodes, others, paused) if charge or capacity is None else capacity
    tenant_gpus: dict[str, float] = {}
    ends: list[tuple[float, float, int, Job]] = []  # (expected end, start, id, job)
    for job in running:
        a = job.attempt
        if a is None:
            continue
        req = job.request
        if charge:
            cap.take_gpus(a.gpus, a.share, a.mem, a.node, req.cpu, req.ram,
                          f"job {job.id}" if explain else "")  # fmt: skip
        tenant_gpus[job.tenant] = tenant_gpus.get(job.tenant, 0.0) + req.gpu_amount
        deadline = a.start + job.time_limit if job.time_limit is not None else INF
        ends.append((deadline, a.start, job.id, job))
        if deadline < INF:
            if deadline <= now and job.state is State.RUNNING:
                out.stops.append(Stop(job.id, f"time limit {format_duration(job.time_limit)}"))
            elif deadline > now:
                _wake(out, deadline)
    if placement == "packer" and profile is None:
        profile = Profile.of(j.request for j in pending)

    states: dict[int, State] | None = None
    started: dict[int, bool] = {}
    static = cap.static  # requests that can never run here: the same for every copy
    head: Job | None = None
    shadow = INF
    reserved: set[int] = set()
    blocked_all = False
    # Thresholds for requests without constraints: once k whole GPUs (or a share s) did not
    # fit, nothing bigger will in this pass (capacity only shrinks). Index 1: with the
    # reservation excluded.
    fits = _Fits(cap, placement, profile)
    placed: dict[int, Placement] = {}  # jobs started in this pass
    exhausted = not explain and cap.n_whole_free == 0 and _no_share_left(cap)
    # Once a job holds a reservation, a job can start only if it fits outside it, or ends
    # before the shadow time and fits in all that is free; without explanations, the jobs
    # that can do neither (too big for the whole GPUs / largest share outside the
    # reservation, and too long or too big for all the free GPUs / largest free share) are
    # passed over at once: the same decisions, without the placement attempts.
    skim = False
    whole_out, share_out, whole_all, share_all, out_stale = 0, 0.0, 0, 0.0, True
    groups = GroupLimits(running)  # at most K running per group (an array's %K)

    def wait(job: Job, reason: Reason, detail: str = "") -> None:
        if explain:
            out.pending[job.id] = Pending(job.id, reason, detail)

    # (nothing can start once every GPU is taken: then the queue is not even sorted)
    walk = pending.walk() if presorted and isinstance(pending, View) and not exhausted else None
    charged: dict[str, float] = {}  # fair share: what jobs started in this pass count for
    held = Held(limits, running) if limits is not None else None
    queue = () if exhausted else ordered(pending, policy, presorted, now, tenant_gpus, usage, walk,
                                         fair=fair, charged=charged)  # fmt: skip
    for job in queue:
        req = job.request
        if exhausted:
            break
        if job.held:
            wait(job, Reason.HELD, "released by `berth release-job`")
            continue
        if job.dependencies:
            if states is None:
                states, started = _dep_states(pending, running, done)
            verdict, detail = deps.check(job, states, started)
            if verdict == deps.NEVER:
                out.cancels.append(Cancel(job.id, f"dependency never satisfied: {detail}"))
                wait(job, Reason.DEPENDENCY_NEVER, detail)
                continue
            if verdict == deps.WAIT:
                wait(job, Reason.DEPENDENCY, detail)
                continue
        if job.not_before is not None and job.not_before > now:
            _wake(out, job.not_before)
            wait(
                job,
                Reason.BEGIN_TIME,
                f"retry backoff, {format_duration(job.not_before - now)} left",
            )
            continue
        if job.group_limit and (why := groups.blocked(job)) is not None:
            wait(job, Reason.ARRAY_TASK_LIMIT, why)  # (no reservation: its group holds it)
            continue
        if held is not None and (over := held.blocked(job)) is not None:
            wait(job, Reason.USER_GPU_LIMIT, over)  # (no reservation: its user's GPUs hold it)
            continue
        if skim and req.gpus:
            if out_stale:
                whole_out, share_out, whole_all, share_all = cap.free_outside(reserved)
                out_stale = False
                if walk is not None:  # leave out the jobs passed over just below
                    walk.narrow(whole_out, share_out, shadow, bool(reserved), whole_all, share_all)
            g = req.gpus
            if (g > whole_out if g >= 1 else g - EPS > share_out) and not (
                reserved and job.time_limit is not None and now + job.time_limit <= shadow < INF
                and (g <= whole_all if g >= 1 else g - EPS <= share_all)
            ):  # fmt: skip
                continue
        key = _req_key(req)
        if key not in static:
            static[key] = static_reason(cap, req)
        bad = static[key]
        if bad is not None:
            wait(job, *bad)
            continue
        if blocked_all:
            fits_now = fits.get(req, ()) is not None
            wait(job, Reason.PRIORITY if fits_now else Reason.RESOURCES,
                 f"behind job {head.id if head else '?'} (strict FIFO)")  # fmt: skip
            if not explain:
                break
            continue
        pl = fits.get(req, reserved)
        if pl is None and reserved:
            fits_all = fits.get(req, ())
            ends_by = now + job.time_limit if job.time_limit is not None else INF
            if fits_all is not None and ends_by <= shadow < INF:
                pl = fits_all
            elif fits_all is not None:
                wait(job, Reason.PRIORITY,
                     f"behind job {head.id if head else '?'}, which has GPUs reserved")  # fmt: skip
                continue
        if pl is not None:
            _start(out, cap, job, pl, now, explain)
            groups.started(job)
            fits.started()
            out_stale = True
            placed[job.id] = pl
            exhausted = not explain and cap.n_whole_free == 0 and _no_share_left(cap)
            tenant_gpus[job.tenant] = tenant_gpus.get(job.tenant, 0.0) + req.gpu_amount
            if fair is not None:
                charged[job.tenant] = charged.get(job.tenant, 0.0) + fair_charge(job)
            if held is not None:
                held.started(job)
            limit = job.time_limit
            ends.append((now + limit if limit is not None else INF, now, job.id, job))
            continue
        if head is None:
            head = job
            if policy == "fifo":
                blocked_all = True
            else:
                shadow, reserved = _reserve(cap, ends, placed, req, placement, profile)
                if shadow < INF:
                    out.expected[job.id] = shadow
                skim = not explain
        if explain:
            rkey = _req_key(req)
            if rkey not in fits.details:
                fits.details[rkey] = resources_detail(cap, req)
            # (when it should start is not part of the reason: the daemon's one estimate,
            # berth.daemon.engine.estimates, says it, and stays true as time passes)
            wait(job, Reason.RESOURCES, fits.details[rkey])
    return out


class _Fits:
    """``place()`` with memory: within a pass capacity only shrinks, so a request that did not
    fit still does not (and, without constraints, neither does a bigger one of the same kind:
    one that must fit on one node, or one that spreads over nodes); results are reused until
    the next start changes the capacity. Every answer is what ``place()`` would say now, so
    which requests were asked before changes nothing but the time taken."""

    __slots__ = ("cap", "details", "fail_share", "fail_whole", "how", "memo", "node_max", "profile")

    def __init__(self, cap: Capacity, how: str, profile: Profile | None) -> None:
        self.cap, self.how, self.profile = cap, how, profile
        # [without, with] the reservation excluded; whole GPUs: [on one node, across nodes]
        # (a job bigger than any node spreads over nodes: it may fit where a smaller one
        # that must stay on one node does not)
        self.fail_whole = [[INF, INF], [INF, INF]]
        self.fail_share = [INF, INF]
        self.node_max = max((len(ps) for ps in cap.node_pos), default=0)
        self.memo: dict[tuple[object, ...], Placement | None] = {}
        self.details: dict[tuple[object, ...], str] = {}  # Resources details, same way

    def started(self) -> None:
        self.memo.clear()
        self.details.clear()

    def get(self, req: Request, exclude: Collection[int]) -> Placement | None:
        slot = 1 if exclude else 0
        simple = req.gpu_ids is None and req.name is None and req.mem is None and not req.cpu
        if simple and not req.ram:
            if req.whole and req.gpus >= self.fail_whole[slot][req.gpus > self.node_max]:
                return None
            if 0 < req.gpus < 1 and req.gpus >= self.fail_share[slot]:
                return None
        key = (*_req_key(req), slot)
        if key in self.memo:
            return self.memo[key]
        pl = self.memo[key] = place(self.cap, req, self.how, self.profile, exclude)
        if pl is None and simple and not req.ram:
            if req.whole:
                fw = self.fail_whole[slot]
                span = req.gpus > self.node_max
                fw[span] = min(fw[span], req.gpus)
            elif req.gpus > 0:
                self.fail_share[slot] = min(self.fail_share[slot], req.gpus)
        return pl


def _start(
    out: Decisions, cap: Capacity, job: Job, pl: Placement, now: float, explain: bool
) -> None:
    req = job.request
    cap.take(pl.positions, req.share, pl.mem, pl.node, req.cpu, req.ram,
             f"job {job.id}" if explain else "")  # fmt: skip
    node = cap.node_names[pl.node] if pl.node >= 0 else ""
    gpus = tuple(cap.index[p] for p in pl.positions)
    out.starts.append(Start(job.id, gpus, req.share, pl.mem, node))


def _reserve(
    cap: Capacity, ends: list[tuple[float, float, int, Job]], placed: dict[int, Placement],
    req: Request, how: str, profile: Profile | None,
) -> tuple[float, set[int]]:  # fmt: skip
    """(shadow time, positions) of the blocked head job's reservation."""
    trial = cap.copy()
    for end, _, jid, job in sorted(ends):  # (ids are unique: jobs are never compared)
        a = job.attempt
        r = job.request
        pl = placed.get(jid)
        if pl is not None:  # started in this pass
            trial.take(pl.positions, r.share, pl.mem, pl.node, r.cpu, r.ram, sign=-1.0)
        elif a is not None:
            trial.take_gpus(a.gpus, a.share, a.mem, a.node, r.cpu, r.ram, sign=-1.0)
        if not could_fit(trial, req):
            continue  # (what place() would find at once, without building its arguments)
        fit = place(trial, req, how, profile)
        if fit is not None:
            return end, set(fit.positions)
    return INF, set()


def _no_share_left(cap: Capacity) -> bool:
    return all(f <= 1e-6 or not u for f, u in zip(cap.free, cap.usable, strict=True))


def _wake(out: Decisions, t: float) -> None:
    if out.wakeup is None or t < out.wakeup:
        out.wakeup = t


def _req_key(r: Request) -> tuple[object, ...]:
    return (r.gpus, r.mem, r.gpu_ids, r.prefer, r.name, r.cpu, r.ram)


def _dep_states(
    pending: Sequence[Job], running: Sequence[Job], done: Mapping[int, State] | None
) -> tuple[dict[int, State], dict[int, bool]]:
    states: dict[int, State] = dict(done or {})
    started: dict[int, bool] = {}
    for j in pending:
        states[j.id] = j.state
        started[j.id] = bool(j.attempts)
    for j in running:
        states[j.id] = j.state
    return states, started
