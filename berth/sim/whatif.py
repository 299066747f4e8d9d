"""``berth simulate --what-if``: when will each pending job start? (like ``squeue --start``)

A pure function of (pending jobs, running jobs, inventory, outside usage, paused GPUs, now):
it replays the queue forward with the core's ``schedule()``, assuming every job runs until its
time limit (the only duration anybody declared), dependencies succeed, outside usage and
paused GPUs stay as they are, and nothing else is submitted. A job without a time limit is
assumed to run ``assume`` seconds and the predictions that depend on it are marked inexact.
The daemon's estimates (:mod:`berth.daemon.engine.estimates`) give ``durations`` instead: the
run time predicted for each job it knows one of (also inexact), and ``assume`` None: a job
with neither a limit nor a prediction never ends, and a job that can only start after it is
"unknown" (its note says so).
On a daemon with fair share (the system daemon) the users' usage as of now (running jobs
included), their shares and their GPU limits (the GPUs they hold with claims outside the
queue counted: ``UserLimits.outside``) are replayed too: ``usage``, ``shares``,
``half_life``, ``limits``; and the daemon's ``max_job_time`` cap on every job's limit.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from berth.core.decisions import Decisions
from berth.core.fairshare import DEFAULT_HALF_LIFE, Book, FairShare, accrued, charged_gpus, usage_at
from berth.core.inventory import Gpu, Node, Usage
from berth.core.job import Job
from berth.core.limits import UserLimits
from berth.core.policy import DEFAULT_PLACEMENT, DEFAULT_POLICY, Inputs, schedule
from berth.core.reservations import Window
from berth.core.states import State
from berth.core.transition import transition

DEFAULT_ASSUME = 3600.0
HORIZON = 365 * 86400.0
UNKNOWN = "unknown: a job ahead has no time limit"


@dataclass(frozen=True, slots=True)
class Prediction:
    """Predicted ``start`` (None: not within a year, or never: held, impossible) and ``end``
    of a job, on ``gpus``; ``exact`` is False when it rests on a job without a time limit."""

    job_id: int
    start: float | None
    end: float | None
    gpus: tuple[int, ...] = ()
    exact: bool = True
    note: str = ""


def predict(
    pending: Sequence[Job],
    running: Sequence[Job],
    inventory: Sequence[Gpu],
    now: float,
    *,
    others: Mapping[int, Usage] | None = None,
    paused: Collection[int] = (),
    nodes: Mapping[str, Node] | None = None,
    policy: str = DEFAULT_POLICY,
    placement: str = DEFAULT_PLACEMENT,
    assume: float | None = DEFAULT_ASSUME,
    durations: Mapping[int, float] | None = None,
    predicted: Callable[[Job], float | None] | None = None,
    done: Mapping[int, State] | None = None,
    usage: Mapping[str, float] | None = None,
    shares: Mapping[str, float] | None = None,
    half_life: float = DEFAULT_HALF_LIFE,
    limits: UserLimits | None = None,
    reservations: Sequence[Window] = (),
    project_usage: Mapping[str, float] | None = None,
    project_shares: Mapping[str, float] | None = None,
    max_job_time: float | None = None,
) -> dict[int, Prediction]:
    """A prediction for every pending job (the jobs given are not changed). ``usage``: each
    tenant's decayed GPU-seconds at ``now``, running jobs included (None: no fair share).
    ``project_usage``, ``project_shares``: the same per project (``Job.project``), the upper
    level of fair share when the daemon has projects (None: none).
    ``predicted``: the passes' ``Inputs.predicted`` (backfill by learned run times).
    ``reservations``: admin reservations, kept as the daemon keeps them.
    ``max_job_time``: the daemon's cap (``[daemon] max_job_time``): every job runs at most
    that long, one without a limit too (None: none)."""
    if not pending:
        return {}
    run = {j.id: _capped(j, max_job_time) for j in running}
    book = None if usage is None else _ended_usage(usage, run.values(), now, half_life)
    pbook = None if usage is None or project_usage is None else _ended_usage(
        project_usage, run.values(), now, half_life, by="project")  # fmt: skip
    fwd = _Forward([_capped(j, max_job_time) for j in pending], run, now, assume, book, done,
                   durations or {}, pbook)  # fmt: skip
    base = Inputs([], [], inventory, others, paused, now, policy=policy, placement=placement,
                  nodes=nodes, done=fwd.finished, explain=False, limits=limits,
                  reservations=reservations, predicted=predicted)  # fmt: skip
    while fwd.pend and fwd.t <= now + HORIZON:
        d = fwd.decide(base, shares or {}, project_shares or {})
        fwd.start(d)
        if not fwd.advance(d):
            break
    endless = ", ".join(str(i) for i in sorted(fwd.endless)[:3])
    for j in fwd.pend:
        if j.held:
            note = "held"
        elif endless:
            note = f"{UNKNOWN} and no runs to learn from (job {endless})"
        else:
            note = "cannot start with the GPUs as they are"
        fwd.out[j.id] = Prediction(j.id, None, None, (), not endless or j.held, note)
    return fwd.out


def _capped(job: Job, most: float | None) -> Job:
    """A copy of ``job`` whose time limit is the one in force (the smaller of its own and
    the daemon's ``most``; ``most`` alone for a job without one), as the daemon stops it."""
    copy = Job.from_dict(job.to_dict())
    if most is not None and (copy.time_limit is None or copy.time_limit > most):
        copy.time_limit = most
    return copy


def _ended_usage(
    usage: Mapping[str, float], running: Iterable[Job], now: float, half_life: float,
    by: str = "tenant",
) -> Book:  # fmt: skip
    """What ended attempts used: the usage less the running jobs' part (``by="project"``:
    per project)."""
    ended = dict(usage)
    for j in running:
        if (a := j.attempt) is not None:
            part = accrued(charged_gpus(j.request), a.start, now, now, half_life)
            key = j.project if by == "project" else j.tenant
            ended[key] = ended.get(key, 0.0) - part
    return Book(half_life, {t: (max(0.0, u), now) for t, u in ended.items()})


class _Forward:
    """The queue replayed forward (on copies of the jobs): a pass at ``t``, its starts and
    cancels, then the next end or wakeup."""

    __slots__ = ("assume", "book", "durations", "endless", "ends", "finished", "inexact", "out",
                 "pbook", "pend", "run", "t")  # fmt: skip

    def __init__(
        self, pend: list[Job], run: dict[int, Job], now: float, assume: float | None,
        book: Book | None, done: Mapping[int, State] | None, durations: Mapping[int, float],
        pbook: Book | None = None,
    ) -> None:  # fmt: skip
        self.pend, self.run, self.t, self.assume, self.book = pend, run, now, assume, book
        self.pbook = pbook  # (the projects' usage: fair share's upper level)
        self.durations = durations
        self.out: dict[int, Prediction] = {}
        self.inexact: set[int] = set()  # jobs whose end is assumed or predicted
        self.endless: set[int] = set()  # jobs that never end (assume None)
        self.finished: dict[int, State] = dict(done or {})  # for dependencies
        self.ends: list[tuple[float, int]] = []
        for j in run.values():
            a = j.attempt
            if a is None:
                continue
            took = self._took(j)
            if took is not None:
                heapq.heappush(self.ends, (max(now, a.start + took), j.id))

    def _took(self, job: Job) -> float | None:
        """How long ``job`` runs in the replay (None: for ever)."""
        took = self.durations.get(job.id)
        if took is not None:
            self.inexact.add(job.id)
            return took
        if job.time_limit is not None:
            return job.time_limit
        if self.assume is None:
            self.endless.add(job.id)
            return None
        self.inexact.add(job.id)
        return self.assume

    def decide(
        self, base: Inputs, shares: Mapping[str, float], project_shares: Mapping[str, float]
    ) -> Decisions:
        fair = None
        pbook = self.pbook
        if self.book is not None and (len({j.tenant for j in self.pend}) > 1 or (
                pbook is not None and len({j.project for j in self.pend}) > 1)):  # fmt: skip
            run = self.run.values()
            fair = FairShare(usage_at(self.book, run, self.t), shares)
            if pbook is not None:
                fair = FairShare(fair.usage, fair.shares,
                                 usage_at(pbook, run, self.t, by="project"), project_shares)  # fmt: skip
        running = list(self.run.values())
        return schedule(base._replace(pending=self.pend, running=running, now=self.t, fair=fair))

    def start(self, d: Decisions) -> None:
        """The pass's starts (running until their time limit) and cancels."""
        t, assume, out = self.t, self.assume, self.out
        # prediction: every job ahead in the machine is a possible cause of delay
        blame = bool(self.inexact)
        by_id = {j.id: j for j in self.pend}
        for s in d.starts:
            job = by_id[s.job_id]
            transition(
                job, State.RUNNING, now=t, gpus=s.gpus, share=s.share, mem=s.mem, node=s.node
            )
            took = self._took(job)
            end = None if took is None else t + took
            note = "" if job.time_limit is not None or job.id in self.durations else (
                "no time limit: runs until it ends" if assume is None
                else f"no time limit: assumed {assume:g}s")  # fmt: skip
            out[job.id] = Prediction(job.id, t, end, s.gpus, not blame, note)
            self.run[job.id] = job
            if end is not None:
                heapq.heappush(self.ends, (end, job.id))
        for c in d.cancels:
            out[c.job_id] = Prediction(c.job_id, None, None, (), True, c.reason)
            by_id[c.job_id].state = State.CANCELLED  # a copy: leaves the queue
        self.pend = [j for j in self.pend if j.state is State.PENDING]

    def advance(self, d: Decisions) -> bool:
        """To the next end or wakeup, ending the jobs due then; False: there is none."""
        ends = self.ends
        nxt = [ends[0][0]] if ends else []
        if d.wakeup is not None and d.wakeup > self.t:
            nxt.append(d.wakeup)
        if not nxt:
            return False
        t = self.t = min(nxt)
        while ends and ends[0][0] <= t:
            _, jid = heapq.heappop(ends)
            job = self.run.pop(jid)
            transition(job, State.COMPLETED, now=t, exit_code=0)
            if self.book is not None and (a := job.attempt) is not None:
                self.book.add(job.tenant, charged_gpus(job.request), a.start, t, t)
                if self.pbook is not None:  # (as the daemon: no project is "", a project)
                    self.pbook.add(job.project, charged_gpus(job.request), a.start, t, t)
            self.finished[jid] = State.COMPLETED
        return True
