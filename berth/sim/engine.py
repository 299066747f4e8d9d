"""The discrete-event simulator: a virtual clock driving ``berth.core.schedule``.

Events are job arrivals (a sorted list) and job ends (a heap). All events at one instant are
applied, then ONE scheduling pass runs -- the very ``schedule()`` the daemon calls, with the
same ``Job`` objects and ``transition()`` -- and its starts schedule their ends. Nothing runs
between events, so a replay costs (events x one pass), not (simulated seconds).

With a preemption rule (``preempt``: :mod:`berth.core.preempt`) each pass is followed by the
rule's decisions: a victim is told to stop (COMPLETING) and ends ``grace`` later as PREEMPTED,
back in the queue with its old queue time; its run is lost (it starts again from the
beginning, as Slurm's requeue), counted in ``RunResult.lost``. Its ``start`` is its last start,
so its wait counts the lost run. With ``checkpoint`` the job instead resumes where it was
told to stop (it saves its state in the grace): only the grace is lost -- the best case.

For speed the simulator keeps the pending list in the policy's order (``presorted=True``) and
asks for no explanations (``explain=False``), which lets a pass stop as soon as nothing more
can fit; neither changes what starts.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from berth.core import deps
from berth.core.decisions import Decisions
from berth.core.fairshare import DEFAULT_HALF_LIFE, Book, FairShare, charged_gpus, usage_at
from berth.core.guard import Arrivals, first, overdue_in
from berth.core.job import Attempt, Job
from berth.core.occupancy import Occupancy
from berth.core.placement import Profile
from berth.core.policy import DEFAULT_PLACEMENT, DEFAULT_POLICY, Inputs, check_policy, schedule
from berth.core.preempt import Rule, preemptions
from berth.core.ranking import Ranking
from berth.core.request import Request
from berth.core.reservations import Window
from berth.core.runtimes import Run, RunTimes, shape_of
from berth.core.states import State
from berth.core.transition import transition
from berth.errors import UsageError
from berth.sim.traces import SimJob
from berth.sim.workload import Inventory

PROFILE_WINDOW = 1000  # the packer's demand profile: the last N arrivals plus the queue
PROFILE_EVERY = 100  # rebuilt every N arrivals (at every pass with arrivals, for the first N)
WAKE = -1  # (an entry in the ends' heap that ends no job: a pass runs at its time)


@dataclass(slots=True)
class RunResult:
    """What happened to every job (``start[i]``/``end[i]`` for ``jobs[i]``) and the timeline
    ``(t, queued, allocated GPUs, free share stranded on partly used GPUs)`` after each pass."""

    policy: str
    placement: str
    capacity: int
    jobs: list[SimJob]
    start: list[float]
    end: list[float]
    placed: list[tuple[int, ...]] = field(default_factory=list)
    timeline: list[tuple[float, int, float, float]] = field(default_factory=list)
    passes: int = 0
    wall: float = 0.0
    timeouts: int = 0
    fairshare: bool = False
    predict: bool = False  # backfilled by learned run times ([scheduling] predict)
    preemptions: int = 0  # attempts the preemption rule ended
    lost: float = 0.0  # GPU-seconds of those attempts (their work is lost), grace included
    saved: dict[int, float] = field(default_factory=dict)  # (checkpoint) index -> run kept


def simulate(
    jobs: list[SimJob],
    inv: Inventory,
    *,
    policy: str = DEFAULT_POLICY,
    placement: str = DEFAULT_PLACEMENT,
    timeline: bool = True,
    fairshare: bool = False,
    half_life: float = DEFAULT_HALF_LIFE,
    reservations: Sequence[Window] = (),
    predict: bool = False,
    preempt: Rule | None = None,
    checkpoint: bool = False,
) -> RunResult:
    """Replay ``jobs`` (sorted by submit) on ``inv`` under ``policy``; deterministic.
    ``fairshare``: with fair share between tenants by decayed usage, as the system daemon
    (:mod:`berth.core.fairshare`; usage halves every ``half_life`` seconds).
    ``reservations``: admin reservations (:mod:`berth.core.reservations`; a job's user is its
    tenant): each window's start and end is an event, as the daemon's timer wakes its pass.
    ``predict``: as ``[scheduling] predict``: backfill by run times learned from the jobs ended
    so far (a tenant's jobs of the same name, :mod:`berth.core.runtimes`) where no limit is
    given.
    ``preempt``: preempt jobs that opted in (``SimJob.requeue``) by this rule; ``checkpoint``:
    a preempted job resumes where it was told to stop (else it starts again from nothing)."""
    check_policy(policy, placement)
    too_big = [j for j in jobs if j.gpus > len(inv[0])]
    if too_big:
        raise UsageError(
            f"job {too_big[0].id} needs {too_big[0].gpus:g} GPUs but the inventory has "
            f"{len(inv[0])}: drop such jobs first (berth simulate does)"
        )
    wall0 = time.perf_counter()
    sim = _Replay(jobs, inv, policy, placement, Book(half_life) if fairshare else None)
    sim.windows = list(reservations)
    sim.changes = sorted({t for w in reservations for t in (w.start, w.end)})
    sim.learned = RunTimes() if predict else None
    sim.res.predict = predict
    sim.rule = preempt
    sim.done = {} if checkpoint else None
    n = len(jobs)
    while sim.arrived < n or sim.ends or sim.window_ahead():
        now = sim.last = sim.next_event()
        sim.end(now)
        sim.arrive(now)
        d = sim.decide(now)
        sim.start(d, now)
        if preempt is not None and sim.queue:
            sim.preempt(now)
        if timeline:
            sim.record(now)
        stuck = not d.starts and not sim.ends and sim.arrived >= n and len(sim.queue) > 0
        if stuck and not sim.window_ahead():
            raise AssertionError(
                f"{len(sim.queue)} jobs can never start (first: job {sim.queue.at(now)[0].id})"
            )
    sim.res.wall = time.perf_counter() - wall0
    return sim.res


class _Replay:
    """The simulator between events, and the steps of one event: the jobs that end, the jobs
    that arrive, the pass, its starts, the timeline."""

    __slots__ = (
        "allocated", "arrived", "arrivals", "book", "changes", "core", "ends", "free", "gpus",
        "held", "index", "jobs", "last", "learned", "nodes", "pbook", "placement", "policy", "pos",
        "predicted", "profile", "queue", "recent", "res", "rule", "running", "stopping",
        "stale", "stranded", "waiting", "wake", "windows", "due", "done",
    )  # fmt: skip

    def __init__(
        self, jobs: list[SimJob], inv: Inventory, policy: str, placement: str, book: Book | None
    ) -> None:
        gpus, nodes = inv
        n = len(jobs)
        self.jobs, self.gpus, self.nodes = jobs, gpus, nodes
        self.policy, self.placement = policy, placement
        self.res = RunResult(policy, placement, len(gpus), jobs, [-1.0] * n, [-1.0] * n, [()] * n)
        self.res.fairshare = book is not None
        self.book = book  # each tenant's usage of ended jobs (fair share)
        has_projects = book is not None and any(j.project for j in jobs)
        self.pbook = Book(book.half_life) if book is not None and has_projects else None
        self.pos = {j.id: i for i, j in enumerate(jobs)}
        self.core: dict[int, Job] = {}
        self.queue = Ranking(policy)  # the pending jobs, in the policy's order
        self.waiting: dict[int, Job] = {}  # the pending jobs, in arrival order
        self.running: dict[int, Job] = {}
        self.held = Occupancy(gpus, nodes)  # what the running jobs hold, kept across passes
        self.ends: list[tuple[float, int]] = []  # (end, job id), a heap
        self.due: dict[int, float] = {}  # running job -> its end in the heap (others: stale)
        self.rule: Rule | None = None  # preemption
        self.stopping: dict[int, tuple[float, str]] = {}  # preempted: (its stop, the reason)
        self.done: dict[int, float] | None = None  # (checkpoint) preempted job -> run so far
        self.wake = -1.0  # (preemption) the last pass asked for, at a victim's minimum run
        self.free = [1.0] * len(gpus)
        self.index = {g.index: k for k, g in enumerate(gpus)}
        self.allocated = 0.0
        self.stranded: float | None = None  # free share on partly used GPUs (None: to count)
        self.recent: list[Request] = []
        self.profile: Profile | None = None
        self.stale = False  # the profile is to be built again at the next pass
        self.arrived = 0
        self.arrivals = Arrivals()  # the work that joined the queue (guarded)
        self.windows: list[Window] = []  # admin reservations
        self.changes: list[float] = []  # their starts and ends, in time order
        self.last = -float("inf")  # the last event's time
        self.learned: RunTimes | None = None  # (predict) run times learned from ended jobs
        self.predicted: dict[int, float] = {}  # (predict) jobs without a limit: their run

    def window_ahead(self) -> bool:
        """Jobs wait and a window opens or closes after the last event (then a pass runs)."""
        changes = self.changes
        while changes and changes[0] <= self.last:
            del changes[0]  # (passed: the pass at that time has run)
        return bool(changes) and len(self.queue) > 0

    def next_event(self) -> float:
        jobs, ends = self.jobs, self.ends
        t_arr = jobs[self.arrived].submit if self.arrived < len(jobs) else float("inf")
        t = min(t_arr, ends[0][0]) if ends else t_arr
        if self.window_ahead() and self.changes[0] < t:
            return self.changes[0]  # a window opens or closes while jobs wait
        return t

    def end(self, now: float) -> None:
        """The jobs whose run ends by ``now``: completed, or timed out at their limit."""
        ends, res = self.ends, self.res
        while ends and ends[0][0] <= now:
            t, jid = heapq.heappop(ends)
            if self.due.get(jid) != t:
                continue  # (a job preempted before this end, or its stop after it ended)
            del self.due[jid]
            job = self.running.pop(jid)
            stop = self.stopping.pop(jid, None)
            if stop is not None and stop[0] == t:
                self.requeue(job, now, stop[1])
                continue
            i = self.pos[jid]
            sj = self.jobs[i]
            timed_out = sj.time_limit is not None and sj.time_limit < sj.duration
            transition(job, State.TIMEOUT if timed_out else State.COMPLETED, now=now,
                       exit_code=None if timed_out else 0)  # fmt: skip
            res.timeouts += timed_out
            if res.end[i] >= 0:
                raise AssertionError(f"job {jid} finished twice")
            res.end[i] = now
            a = self.release(job, now)
            if self.learned is not None and not timed_out:
                self.learned.add(Run(job.tenant, job.name, *shape_of(job), now - a.start))
                self.predicted.pop(jid, None)

    def release(self, job: Job, now: float) -> Attempt:
        """Free what the job's attempt (just ended) held; charge it to fair share."""
        self.held.end(job)
        a = job.attempts[-1]
        if self.book is not None:
            self.book.add(job.tenant, charged_gpus(job.request), a.start, now, now)
        if self.pbook is not None:  # (fair share's upper level: the project's usage)
            self.pbook.add(job.project, charged_gpus(job.request), a.start, now, now)
        for g in a.gpus:
            self.free[self.index[g]] += a.share
        self.allocated -= job.request.gpu_amount
        self.stranded = None
        return a

    def preempt(self, now: float) -> None:
        """The preemption rule after the pass: each victim is told to stop; it ends after the
        grace (or at its own end, if sooner)."""
        rule = self.rule
        assert rule is not None
        running = list(self.running.values())
        if not any(j.requeue for j in running):
            return
        met = deps.Lazy(self.queue.at(now), running, None, now).met  # (as the pass's)
        head = None
        if self.policy == "guarded":
            head = overdue_in(self.queue.at(now), running, now, self.arrivals.any(), met)
        order = first(self.queue.at(now), head)
        todo, ready = preemptions(order, running, now, rule, met)
        if ready is not None and ready != self.wake:  # (a pass then: a minimum run is over)
            self.wake = ready
            heapq.heappush(self.ends, (ready, WAKE))
        for p in todo:
            job = self.running[p.job_id]
            transition(job, State.COMPLETING, now=now, reason=p.reason)
            stop = now + rule.grace
            self.stopping[job.id] = (stop, p.reason)
            if stop < self.due[job.id]:
                self.due[job.id] = stop
                heapq.heappush(self.ends, (stop, job.id))

    def requeue(self, job: Job, now: float, reason: str) -> None:
        """A preempted job's stop: its attempt is PREEMPTED (its work lost), and it rejoins
        the queue with its old queue time (its place kept)."""
        queued = job.queue_time
        transition(job, State.PREEMPTED, now=now, reason=reason)
        job.queue_time = queued
        a = self.release(job, now)
        self.res.preemptions += 1
        ran = now - a.start
        if self.done is not None and self.rule is not None:  # (saved when told to stop)
            ran = max(0.0, ran - self.rule.grace)
            self.done[job.id] = self.res.saved[self.pos[job.id]] = self.done.get(job.id, 0.0) + ran
            ran = now - a.start - ran
        self.res.lost += a.share * len(a.gpus) * ran
        self.queue.add(job)
        self.waiting[job.id] = job
        self.arrivals.add(job)  # (its old queue time: not an arrival again)

    def arrive(self, now: float) -> None:
        """The jobs submitted by ``now`` join the queue (and the packer's demand profile)."""
        jobs, n = self.jobs, len(self.jobs)
        while self.arrived < n and jobs[self.arrived].submit <= now:
            sj = jobs[self.arrived]
            self.arrived += 1
            job = Job(
                id=sj.id, submit_time=sj.submit, name=sj.name, tenant=sj.tenant or "-",
                user=sj.tenant or "-",
                project=sj.project, priority=sj.priority, time_limit=sj.time_limit,
                request=Request(gpus=sj.gpus, mem=sj.mem, gpu_ids=sj.gpu_ids, cpu=sj.cpu, ram=sj.ram),
                requeue=sj.requeue, max_requeues=0,  # (preemption only: a time limit ends it)
            )  # fmt: skip
            self.core[sj.id] = job
            self.arrivals.add(job)
            if self.learned is not None and sj.time_limit is None:
                rt = self.learned.predict(job, job.tenant)
                if rt is not None:
                    self.predicted[job.id] = rt.typical
            self.queue.add(job)
            self.waiting[job.id] = job
            if self.placement == "packer":
                recent = self.recent
                recent.append(job.request)
                if self.arrived <= PROFILE_EVERY or self.arrived % PROFILE_EVERY == 1:
                    del recent[:-PROFILE_WINDOW]
                    self.stale = True  # (built at the pass: all of this time's arrivals in)

    def decide(self, now: float) -> Decisions:
        """One pass, the daemon's, on the kept capacity and order."""
        # Every GPU taken: the pass can start nothing, so it needs no queue (a share of 1e-9
        # is far below what schedule() counts as free, 1e-6).
        full = max(self.free, default=0.0) <= 1e-9
        if self.stale:
            self.stale = False
            first = _first(self.queue, self.waiting)
            self.profile = Profile.of(self.recent + [p.request for p in first])
        fair = None
        if self.book is not None and not full:
            running = self.running.values()
            fair = FairShare(usage_at(self.book, running, now))
            if self.pbook is not None:  # two levels: projects, then tenants within one
                fair = FairShare(fair.usage, {}, usage_at(self.pbook, running, now, "project"))
        self.res.passes += 1
        predicted = self.predicted
        for jid, job in self.running.items() if predicted else ():
            took = predicted.get(jid)
            if took is not None and job.attempts[-1].start + took <= now:  # outran it
                predicted[jid] = 2 * (now - job.attempts[-1].start)  # (re-predicted)
        return schedule(Inputs(
            [] if full else self.queue.at(now), list(self.running.values()), self.gpus, None,
            (), now, policy=self.policy, placement=self.placement, nodes=self.nodes,
            profile=self.profile, explain=False, presorted=True, capacity=self.held.capacity(),
            fair=fair, reservations=self.windows, arrivals=self.arrivals,
            predicted=self._predicted if self.learned is not None else None,
        ))  # fmt: skip

    def _predicted(self, job: Job) -> float | None:
        return self.predicted.get(job.id)

    def start(self, d: Decisions, now: float) -> None:
        """The pass's starts: running until their end (or time limit)."""
        started = []
        res = self.res
        for s in d.starts:
            job = self.core[s.job_id]
            transition(
                job, State.RUNNING, now=now, gpus=s.gpus, share=s.share, mem=s.mem, node=s.node
            )
            started.append(job)
            del self.waiting[job.id]
            self.running[job.id] = job
            self.held.start(job)
            i = self.pos[job.id]
            res.start[i] = now
            res.placed[i] = s.gpus
            sj = self.jobs[i]
            run = sj.duration if sj.time_limit is None else min(sj.duration, sj.time_limit)
            if self.done:  # (checkpoint: the run left)
                run = max(0.0, run - self.done.get(job.id, 0.0))
            heapq.heappush(self.ends, (now + run, job.id))
            self.due[job.id] = now + run
            for g in s.gpus:
                self.free[self.index[g]] -= s.share
            self.allocated += job.request.gpu_amount
            self.stranded = None
        if started:
            self.queue.prune(started)

    def record(self, now: float) -> None:
        stranded = self.stranded
        if stranded is None:  # (counted again only once a job started or ended)
            stranded = self.stranded = sum([f for f in self.free if 1e-9 < f < 1 - 1e-9])
        self.res.timeline.append((now, len(self.queue), self.allocated, stranded))


def _first(queue: Ranking, waiting: dict[int, Job]) -> list[Job]:
    """The packer's view of the queue: its first ``PROFILE_WINDOW`` jobs, in the policy's order
    (kept sorted), or, for ``balanced`` (whose order moves), in arrival order."""
    if not queue.dynamic:
        return queue.jobs[:PROFILE_WINDOW]
    return list(itertools.islice(waiting.values(), PROFILE_WINDOW))
