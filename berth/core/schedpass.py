"""One scheduling pass, in parts: what :func:`berth.core.policy.schedule` runs.

A :class:`Pass` takes one ``Inputs`` record and decides in four steps (rules: ``core.policy``):

1. :meth:`Pass.charge`: what the running jobs hold and their expected ends (reservations).
2. :meth:`Pass.gate`: in the order of :func:`berth.core.order.ordered`, each pending job's
   reason to wait that no free GPU would lift: held, a dependency (or a ``Cancel`` when it can
   never be met), a retry backoff, its array's ``%K``, its user's GPU limit, its project's.
3. :meth:`Pass.place`: a job starts where it fits outside the reservation, or anywhere if it
   ends before the shadow time; or it waits behind the blocked job (admin reservations too).
4. :meth:`Pass.reserve`: a job that does not fit waits for resources; the first such job gets
   the reservation (EASY backfill; under ``fifo`` it blocks every job after it).

The state between the steps lives on the pass, one object per call: pure as a whole.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from berth.core import alike, deps, fits
from berth.core.capacity import INF, Capacity
from berth.core.decisions import Cancel, Decisions, Pending, Start
from berth.core.explain import resources_detail, static_reason
from berth.core.fairshare import fair_charge
from berth.core.fits import End, Fits, cpu_only, nothing_left, req_key, reservation
from berth.core.groups import GroupLimits
from berth.core.guard import overdue_in
from berth.core.job import Job
from berth.core.limits import Held, ProjectHeld
from berth.core.order import ordered
from berth.core.placement import Placement, Profile
from berth.core.ranking import Queued, View, Walk
from berth.core.reservations import ahead, holding, kept_off, live, next_change, why
from berth.core.states import Reason
from berth.units import format_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.core.inputs import Inputs


class Pass:
    """One pass over ``inputs``: :meth:`run` once (see the module docstring)."""

    __slots__ = (
        "blocked_all", "cap", "charged", "charged_projects", "known", "done", "done_projects",
        "ends", "fits", "free_out", "groups", "head", "inp", "out", "out_stale", "placed",
        "profile", "project_gpus", "queue", "reserved", "shadow", "skim", "started", "static",
        "stop", "cpu_only", "tenant_gpus", "user_gpus", "walk", "windows",
    )  # fmt: skip

    def __init__(self, inputs: Inputs) -> None:
        self.inp = inputs
        self.out = Decisions()
        self.tenant_gpus: dict[str, float] = {}  # GPUs each tenant holds (fairshare's order)
        self.ends: list[End] = []  # running jobs and jobs started in this pass
        self.placed: dict[int, Placement] = {}  # jobs started in this pass
        self.charged: dict[str, float] = {}  # fair share: what jobs started here count for
        self.known = deps.Lazy(inputs.pending, inputs.running, inputs.done, inputs.now)
        self.charged_projects: dict[str, float] = {}  # ... per project
        self.head: Job | None = None  # the first job that did not fit
        self.shadow = INF  # when the head job is expected to start
        self.reserved: set[int] = set()  # the positions kept for it
        self.blocked_all = False  # fifo: the head job blocks every job after it
        # Once a job holds a reservation, a job can start only if it fits outside it, or ends
        # before the shadow time and fits in all that is free; without explanations, the jobs
        # that can do neither (too big for the whole GPUs / largest share outside the
        # reservation, and too long or too big for all the free GPUs / largest free share) are
        # passed over at once: the same decisions, without the placement attempts.
        self.skim = False
        self.free_out: tuple[int, float, int, float] = (0, 0.0, 0, 0.0)  # Capacity.free_outside
        self.out_stale = True
        self.stop = False  # nothing after this job can start (without explanations)
        self.cpu_only: bool | None = None  # some pending job is CPU-only: at first need
        self.groups: GroupLimits | None = None  # at most K running per group: at first need
        self.started: list[Job] = []  # jobs started in this pass
        limits = inputs.limits
        self.user_gpus = Held(limits, inputs.running) if limits is not None else None
        projects = limits.projects if limits is not None else None
        self.project_gpus = ProjectHeld(projects, inputs.running) if projects else None
        self.profile = inputs.profile
        # admin reservations not over yet (berth.core.reservations)
        self.windows = live(inputs.reservations, inputs.now) if inputs.reservations else []
        self.walk: Walk | None = None
        self.queue: Iterable[Job] = ()
        self.done: set[str] = set()  # tenants none of whose jobs can start in this pass
        self.done_projects: set[str] = set()  # ... projects
        self.cap: Capacity  # set by charge()
        self.static: dict[tuple[object, ...], tuple[Reason, str] | None]
        self.fits: Fits

    def run(self) -> Decisions:
        """Decide (once): the four steps, over the pending jobs in the pass's order."""
        self.charge()
        gate, place, reserve = self.gate, self.place, self.reserve
        considered = self.out.order if self.inp.explain else None
        enough, before = self.inp.explain_stop if self.inp.explain else None, None  # core.alike
        for job in self.queue:
            if considered is not None:
                considered.append(job.id)
            if before and alike.waits_alike(job, before) and not (self.windows or self.blocked_all):
                self.out.pending[job.id] = self.out.pending[before.id]  # (one entry a run)
            elif gate(job) or place(job):
                before = None
                if self.stop:
                    break
            else:
                reserve(job)
                before = job if considered is not None else None
            if enough is not None and enough(job):
                self.out.partial = True  # (Inputs.explain_stop: the caller has what it needs)
                break
        return self.out

    def _nothing_left(self, cap: Capacity) -> bool:
        if self.cpu_only is None and not cap.n_whole_free:  # (asked at most once a pass)
            p = self.inp.pending  # (a ranking counts its CPU-only jobs: no walk)
            self.cpu_only = (
                p.ranking.cpu_only > 0 if isinstance(p, (View, Queued)) else cpu_only(p)
            )
        return nothing_left(cap, bool(self.cpu_only))

    def wait(self, job: Job, reason: Reason, detail: str = "") -> None:
        if self.inp.explain:
            self.out.pending[job.id] = Pending(job.id, reason, detail)

    # -- 1. charge -------------------------------------------------------------------------

    def charge(self) -> None:
        """What the running jobs hold and when they are expected to end; then the pending jobs
        in the order this pass considers them."""
        inp, out, now = self.inp, self.out, self.inp.now
        explain = inp.explain
        cap = inp.capacity
        recharge = cap is None or explain
        if cap is None or explain:
            cap = Capacity(inp.inventory, inp.nodes, inp.others, inp.paused)
        self.cap = cap
        tenant_gpus, ends = self.tenant_gpus, self.ends
        soonest = INF  # the next time limit to come
        for job in inp.running:
            a = job.attempt
            if a is None:
                continue
            req = job.request
            if recharge:
                cap.take_gpus(a.gpus, a.share, a.mem, a.node, req.cpu, req.ram,
                              f"job {job.id}" if explain else "")  # fmt: skip
            tenant_gpus[job.tenant] = tenant_gpus.get(job.tenant, 0.0) + req.gpu_amount
            deadline = a.start + job.time_limit if job.time_limit is not None else INF
            ends.append((self._ends_by(job, a.start), a.start, job.id, job))
            if now < deadline < soonest:
                soonest = deadline
        if soonest < INF:
            out.wake_at(soonest)
        if self.windows and (change := next_change(self.windows, now)) is not None:
            out.wake_at(change)  # (a window opens or closes: what may start changes)
        if inp.placement == "packer" and self.profile is None:
            self.profile = Profile.of(j.request for j in inp.pending)
        self.static = cap.static  # requests that can never run here: the same for every copy
        self.fits = Fits(cap, inp.placement, self.profile)
        if not explain and self._nothing_left(cap):
            self.stop = True  # nothing can start: the queue is not even sorted
        else:
            self._order()

    def _order(self) -> None:
        """The pending jobs in the order this pass considers them."""
        inp = self.inp
        pending = inp.pending
        if inp.presorted and isinstance(pending, View):
            self.walk = pending.walk()
        head = None
        if inp.policy == "guarded":  # (its overdue job first: berth.core.guard)
            head = overdue_in(pending, inp.running, inp.now, inp.arrivals, self.known.met)
        self.queue = ordered(pending, inp.policy, inp.presorted, inp.now, self.tenant_gpus,
                             inp.usage, self.walk, fair=inp.fair, charged=self.charged,
                             done=self.done, charged_projects=self.charged_projects,
                             done_projects=self.done_projects, head=head)  # fmt: skip

    # -- 2. gate ---------------------------------------------------------------------------

    def gate(self, job: Job) -> bool:
        """True when the job waits for something no free GPU would give it (its reason
        recorded, and a ``Cancel`` if its dependency can never be met)."""
        if job.held:
            self.wait(job, Reason.HELD, "released by `berth release-job`")
            return True
        if job.dependencies:
            verdict, detail, wake = deps.check(job, self.known.get(), self.inp.now)
            if wake is not None:
                self.out.wake_at(wake)  # (after:ID+MINUTES)
            if verdict == deps.NEVER:
                self.out.cancels.append(Cancel(job.id, f"dependency never satisfied: {detail}"))
                self.wait(job, Reason.DEPENDENCY_NEVER, detail)
                return True
            if verdict == deps.WAIT:
                self.wait(job, Reason.DEPENDENCY, detail)
                return True
        now = self.inp.now
        if job.not_before is not None and job.not_before > now:
            self.out.wake_at(job.not_before)
            left = format_duration(job.not_before - now)
            wait_for = "retry backoff" if job.attempts else "its begin time (--begin)"
            self.wait(job, Reason.BEGIN_TIME, f"{wait_for}, {left} left")
            return True
        if job.group_limit and (why := self._groups().blocked(job)) is not None:
            self.wait(job, Reason.ARRAY_TASK_LIMIT, why)  # (no reservation: its group holds it)
            return True
        user_gpus = self.user_gpus
        if user_gpus is not None and (over := user_gpus.blocked(job)) is not None:
            self.wait(job, Reason.USER_GPU_LIMIT, over)  # (no reservation: its user's GPUs)
            self._full(job)
            return True
        project_gpus = self.project_gpus
        if project_gpus is not None and (over := project_gpus.blocked(job)) is not None:
            self.wait(job, Reason.PROJECT_GPU_LIMIT, over)  # (no reservation: its project's)
            if not self.inp.explain and project_gpus.full(job.project):
                self.done_projects.add(job.project)
            return True
        return False

    def _full(self, job: Job) -> None:
        """Without explanations: skip the rest of the jobs of ``job``'s user if none can start."""
        held = self.user_gpus
        if not self.inp.explain and held and job.tenant == job.user and held.stuck(job.user, self.cap):
            self.done.add(job.tenant)

    def _groups(self) -> GroupLimits:
        if self.groups is None:
            self.groups = GroupLimits(itertools.chain(self.inp.running, self.started))
        return self.groups

    # -- 3. place --------------------------------------------------------------------------

    def place(self, job: Job) -> bool:
        """Start the job if it may and fits, or record why it waits: True. False: it does not
        fit, and waits for resources (:meth:`reserve`)."""
        req = job.request
        if self.skim and req.gpus and self._passed_over(job):
            return True
        key = req_key(req)
        static = self.static
        if key not in static:
            static[key] = static_reason(self.cap, req)
        bad = static[key]
        if bad is not None:
            self.wait(job, *bad)
            return True
        head = self.head
        if self.blocked_all:
            fits_now = self.fits.get(req, ()) is not None
            self.wait(job, Reason.PRIORITY if fits_now else Reason.RESOURCES,
                      f"behind job {head.id if head else '?'} (strict FIFO)")  # fmt: skip
            self.stop = not self.inp.explain
            return True
        if self.user_gpus is not None and req.gpus < 1:
            only = self.user_gpus.within(job)
            if only is not None:
                return self._within(job, self.user_gpus, only)
        if self.windows:  # admin reservations (berth.core.reservations)
            return self._around(job)
        reserved = self.reserved
        pl = self.fits.get(req, reserved)
        if pl is None and reserved:
            fits_all = self.fits.get(req, ())
            ends_by = self._ends_by(job)
            if fits_all is not None and ends_by <= self.shadow < INF:
                pl = fits_all
            elif fits_all is not None:
                return self._behind(job)
        if pl is None:
            return False
        self._start(job, pl)
        return True

    def _around(self, job: Job) -> bool:
        """:meth:`place` where admin reservations are kept: a holder's job tries its reserved
        GPUs first; a job kept off some GPUs that would fit but for them waits as
        ``Reservation``."""
        req, now, pos = job.request, self.inp.now, self.cap.pos
        mine = holding(self.windows, job, now, pos)
        if mine:  # (a head kept off them has them only once they close: never before mine)
            rest = frozenset(range(len(self.cap.index))) - mine
            theirs = mine - holding(self.windows, self.head, now, pos) if self.head else mine
            pl = self.fits.get_off(req, self.reserved - theirs, rest)
            if pl is not None:
                self._start(job, pl)
                return True
        off, first = kept_off(self.windows, job, now, pos)
        pl, behind = self.fits.fit(req, self.reserved, off, self._ends_by(job), self.shadow)
        if pl is None and not behind and first is not None:
            free, free_behind = self.fits.fit(req, self.reserved, frozenset(), self._ends_by(job),
                                              self.shadow)
            if free is not None or free_behind:  # it would fit, but for the reservations
                self.wait(job, Reason.RESERVATION, why(first, job, now))
                if self.head is None:  # it is the head all the same (issue 32.2)
                    self._head(job, kept=True)
                return True
        if behind:
            return self._behind(job)
        if pl is None:
            return False
        self._start(job, pl)
        return True

    def _within(self, job: Job, held: Held, only: frozenset[int]) -> bool:
        """A share job of a user at their GPU limit: it starts only on a GPU they hold part
        of already (outside any reservation), else waits for their limit (issue 41.3)."""
        off = kept_off(self.windows, job, self.inp.now, self.cap.pos)[0] if self.windows else ()
        pl = self.fits.within(job.request, only, (*self.reserved, *off))
        if pl is None:
            self.wait(job, Reason.USER_GPU_LIMIT, held.no_room(job.user))
            self._full(job)
        else:
            self._start(job, pl)
        return True

    def _behind(self, job: Job) -> bool:
        """``job`` waits behind the blocked head, whose GPUs are reserved (EASY backfill)."""
        head = self.head
        self.wait(job, Reason.PRIORITY,
                  f"behind job {head.id if head else '?'}, which has GPUs reserved")  # fmt: skip
        return True

    def _ends_by(self, job: Job, start: float | None = None) -> float:
        """Its expected end: by its limit, else its prediction (``Inputs.predicted``)."""
        return fits.ends_by(job, start, self.inp.now, self.inp.predicted)

    def _passed_over(self, job: Job) -> bool:
        """After a reservation, without explanations: the job can neither fit outside the
        reservation nor end before the shadow time in all that is free."""
        if self.out_stale:
            self.free_out = self.cap.free_outside(self.reserved)
            self.out_stale = False
            if self.walk is not None and self.inp.predicted is None:  # drop those passed over
                whole_out, share_out, whole_all, share_all = self.free_out
                self.walk.narrow(whole_out, share_out, self.shadow, bool(self.reserved),
                                 whole_all, share_all)  # fmt: skip
        return fits.passed_over(self.free_out, job, self._ends_by(job), self.shadow, bool(self.reserved))

    def _start(self, job: Job, pl: Placement) -> None:
        inp, cap, req = self.inp, self.cap, job.request
        cap.take(pl.positions, req.share, pl.mem, pl.node, req.cpu, req.ram,
                 f"job {job.id}" if inp.explain else "")  # fmt: skip
        node = cap.node_names[pl.node] if pl.node >= 0 else ""
        gpus = tuple(cap.index[p] for p in pl.positions)
        self.out.starts.append(Start(job.id, gpus, req.share, pl.mem, node))
        self.started.append(job)
        if self.groups is not None:
            self.groups.started(job)
        self.fits.started()
        self.out_stale = True
        self.placed[job.id] = pl
        self.stop = not inp.explain and self._nothing_left(cap)
        self.tenant_gpus[job.tenant] = self.tenant_gpus.get(job.tenant, 0.0) + req.gpu_amount
        if inp.fair is not None:
            charge = fair_charge(job)
            self.charged[job.tenant] = self.charged.get(job.tenant, 0.0) + charge
            cp = self.charged_projects
            cp[job.project] = cp.get(job.project, 0.0) + charge
        if self.user_gpus is not None:
            self.user_gpus.started(job, gpus)
        if self.project_gpus is not None:
            self.project_gpus.started(job)
        self.ends.append((self._ends_by(job), inp.now, job.id, job))

    # -- 4. reserve ------------------------------------------------------------------------

    def _head(self, job: Job, kept: bool = False) -> None:
        """``job`` is the first that cannot start (or ``kept`` off by admin reservations): the
        EASY reservation (``fifo``: it blocks every job after it, unless ``kept``)."""
        inp = self.inp
        self.head = job
        if inp.policy == "fifo" and not kept:
            self.blocked_all = True
            return
        off, changes = ahead(self.windows, job, inp.now, self.cap.pos)
        self.shadow, self.reserved = reservation(self.cap, self.ends, self.placed, job.request,
                                                 inp.placement, self.profile, off, changes)
        if self.shadow < INF:
            self.out.expected[job.id] = self.shadow
        self.skim = not inp.explain and not self.windows  # (a holder passes it: _around)

    def reserve(self, job: Job) -> None:
        """The job does not fit: the first such job gets the reservation (under ``fifo``: it
        blocks every job after it); every one waits for resources."""
        inp, req = self.inp, job.request
        if self.head is None:
            self._head(job)
        if inp.explain:
            details, rkey = self.fits.details, req_key(req)
            if rkey not in details:
                details[rkey] = resources_detail(self.cap, req)
            # (when it should start is not part of the reason: the daemon's one estimate,
            # berth.daemon.engine.estimates, says it, and stays true as time passes)
            self.wait(job, Reason.RESOURCES, details[rkey])
