"""When each pending job is expected to start: the one estimate `berth queue --start`,
`berth show`, `berth queue --json`, the dashboard and MCP's why_pending all show.

It is :func:`berth.sim.whatif.predict` (the queue replayed forward with the core's
``schedule()``: the real policy, reservations, fair share and the users' limits) fed with what
the daemon's own passes see: its inventory, the GPUs' outside use (claims, waiters, processes
outside berth), the drained GPUs, the policy, fair share and the users' limits. Each job runs
in the replay for its learned run time (:mod:`berth.core.runtimes`, learned from the daemon's
finished jobs: :mod:`berth.daemon.engine.history` once at start, then each job as it ends),
capped by its time limit in force (its ``-t``, or the daemon's ``--max-job-time`` when
smaller); a job with neither runs until its limit; one with neither a limit nor a prediction
never ends, and only the jobs that can start after nothing else but it read "unknown". Where
predictions are used the queue is replayed twice: with the typical run times (``start``) and
with their 90th percentiles (``latest``): the range. A running job that outran its prediction
is re-predicted (:meth:`berth.core.runtimes.RunTime.remaining`), never stopped.

It is computed again only when the queue changes (a job joins, starts, ends, is held,
released or re-prioritised, a GPU is drained or resumed, outside use comes or goes, a run is
learned) or a minute has passed, at most every :data:`MIN_AGE` seconds while the queue keeps
changing (but at once for a job not estimated yet), and for at most :data:`MOST` pending jobs
in the policy's order (later ones read "unknown"): a long queue costs the daemon one or two
replays per change, not one per viewer or request.

Each estimate is ``{"start": time or None, "end": time or None, "gpus": [...], "exact": bool,
"note": ..., "latest": time or None, "runtime": {...} or None, "begin": time or None, "after":
[job ids]}``. ``exact``: the start rests on time limits only, so it is at the latest then
("in <= 10:00"); else on predictions ("in ~10:00", ``latest`` the late end of the range).
``start`` is None when it cannot be told ("unknown: ..." says why: a job ahead has neither a
time limit nor runs to learn from); the job is held; it cannot start with the GPUs as they
are; the queue is paused. ``runtime``: the job's own predicted run time
(:meth:`berth.core.runtimes.RunTime.to_dict`); ``begin``: its ``--begin`` still to come;
``after``: the jobs its dependencies still wait for. The words: :mod:`berth.cli.queue_starts`
(the page's ``startText`` says the same).
"""

from __future__ import annotations

import itertools

from berth.core.job import Job
from berth.core.policy import DEFAULT_POLICY
from berth.core.runtimes import RunTimes, run_of
from berth.core.states import State
from berth.daemon.engine import history
from berth.daemon.engine.accuracy import Accuracy
from berth.sim.whatif import Prediction, predict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from berth.core.runtimes import RunTime
    from berth.daemon.engine.host import Host

MOST = 300  # pending jobs estimated (in the policy's order): ~0.1 s of replay on 8 GPUs
MAX_AGE = 60.0  # seconds an estimate is kept when nothing changes
MIN_AGE = 2.0  # seconds between two replays while the queue keeps changing (a new job: at once)
_WAITED = (State.PENDING, State.RUNNING, State.COMPLETING)  # a dependency still to end


class Starts:
    """The estimates of one replay: each of the first :data:`MOST` pending jobs' own, and one
    shared entry for every other pending job ("unknown: more than 300 jobs ahead"; "the queue
    is paused"): a long queue keeps 300 entries, not one per job. Read-only."""

    __slots__ = ("_engine", "_far", "_head")

    def __init__(
        self, engine: Host, head: dict[int, dict[str, Any]], far: dict[str, Any]
    ) -> None:
        self._engine, self._head, self._far = engine, head, far

    def get(self, job_id: int) -> dict[str, Any] | None:
        """The job's estimate; None for a job that is not pending."""
        found = self._head.get(job_id)
        if found is not None:
            return found
        job = self._engine.live(job_id)
        return self._far if job is not None and job.state is State.PENDING else None


class Estimates:
    """The daemon's start estimates, kept until the queue changes, and the run times they
    learn from (:attr:`runtimes`: read from the history at first use, then :meth:`learn`)."""

    def __init__(self, engine: Host) -> None:
        self.engine = engine
        self._key = 0  # (a hash of what the estimates depend on: not the queue's copy)
        self._at = float("-inf")
        self._top = 0  # the jobs inserted when they were computed
        self._out = Starts(engine, {}, _entry(None, None, (), "unknown: not estimated yet"))
        self._runtimes: RunTimes | None = None
        self._read: set[int] = set()  # the jobs the history gave (until the first learned)
        self.accuracy = Accuracy()  # how good the first estimates were (the last week)
        self.computed = 0  # how many times they were computed (for tests)

    @property
    def runtimes(self) -> RunTimes:
        """The run times learned: the store's finished jobs, read once."""
        if self._runtimes is None:
            learned = self._runtimes = RunTimes()
            for row in history.finished(self.engine.store):
                self._read.add(row.id)
                run = row.run()
                if run is not None:
                    learned.add(run)
                if row.estimated is not None:
                    self.accuracy.add(row.ended, row.estimated, row.first)
        return self._runtimes

    def learn(self, job: Job) -> None:
        """A job that ended: what it ran for teaches (its end is in the store or about to be:
        learned here, once either way, as the history is read before)."""
        learned = self.runtimes
        read, self._read = self._read, set()
        if job.id in read:
            return
        run = run_of(job)
        if run is not None:
            learned.add(run)
        if "estimated" in job.extra and job.attempts:
            ended = job.attempts[-1].end or job.attempts[-1].start
            self.accuracy.add(ended, job.extra["estimated"], job.attempts[0].start)

    def predicted(self, job: Job) -> RunTime | None:
        """The job's run time as learned (capped by its time limit), or None."""
        return self.runtimes.predict(job)

    def backfill(self, now: float) -> Callable[[Job], float | None] | None:
        """``Inputs.predicted`` for a pass at ``now`` with ``[scheduling] predict`` (else
        None): a job's learned run time (typical; a running job that outran it: re-predicted,
        :meth:`berth.core.runtimes.RunTime.remaining`)."""
        if not self.engine.res.cfg.predict:
            return None
        learned = self.runtimes

        def predicted(job: Job) -> float | None:
            rt = learned.predict(job)
            if rt is None:
                return None
            a = job.attempt
            if a is None or a.end is not None:
                return rt.typical
            return rt.remaining(max(0.0, now - a.start), None)[0]

        return predicted

    def get(self) -> Starts:
        """The estimate of every pending job (:meth:`Starts.get`)."""
        eng = self.engine
        now = eng.clock.time()
        others = eng.outside_usage()
        key = hash((
            # every change of a job (joined, started, ended, held, released, updated) is
            # queued to the journal, which counts them: not a look at each unfinished job at
            # every look (100,000 of them: a tenth of a screen of `berth queue`)
            eng.journal.changes,
            tuple(sorted(eng.pauses.indexes())),
            eng.pauses.queue,
            tuple(eng.reservations.entries),
            tuple(sorted((i, u.share, u.mem, u.busy) for i, u in others.items())),
            self.runtimes.added,
        ))  # fmt: skip
        age = now - self._at
        top = eng.journal.inserts
        new = top > self._top  # (a job submitted since: estimated at once)
        if age > MAX_AGE or (key != self._key and (age >= MIN_AGE or new)):
            self._out = self._compute(now, others)
            self._key, self._at, self._top = key, now, top
            self.computed += 1
        return self._out

    def _compute(self, now: float, others: Any) -> Starts:
        eng = self.engine
        if eng.pauses.queue:
            return Starts(eng, {}, _entry(None, None, (), "the queue is paused"))
        policy = eng.opts.policy or DEFAULT_POLICY
        # the head only, in the policy's order at ``now``: the order the passes keep (a
        # sorted list, or the ranking walked), not a key made for each of 100,000 jobs
        pending = list(itertools.islice(eng.order.pending(eng.jobs.values(), policy, now), MOST))
        most = eng.opts.max_job_time
        running = [
            _limited(j, most)
            for j in eng.unfinished()
            if j.state in (State.RUNNING, State.COMPLETING)
        ]
        head = [_limited(j, most) for j in pending]
        likely, late, own = self._durations(running, head, now)
        fair = eng.accounts.fair(running, now)

        def replay(durations: dict[int, float]) -> dict[int, Prediction]:
            return predict(
                head, running, eng.res.inventory, now, others=others,
                paused=eng.pauses.indexes(), policy=policy, done=eng.finished_states,
                usage=None if fair is None else dict(fair.usage),
                shares=None if fair is None else dict(fair.shares),
                project_usage=None if fair is None or not eng.accounts.projects.any
                else dict(fair.project_usage),
                project_shares=None if fair is None else dict(fair.project_shares),
                half_life=eng.accounts.book.half_life, limits=eng.accounts.user_limits(),
                reservations=eng.reservations.windows(now), assume=None, durations=durations,
                predicted=self.backfill(now),
            )  # fmt: skip

        preds = replay(likely)
        lates = replay(late) if likely else preds
        out: dict[int, dict[str, Any]] = {}
        for j in pending:
            p = preds.get(j.id)
            if p is None:
                continue  # (the shared entry)
            e = _entry(p.start, p.end, p.gpus, "" if p.start is not None else p.note, p.exact)
            q = lates.get(j.id)
            if p.start is not None and q is not None and q.start is not None:
                e["latest"] = max(p.start, q.start)
            rt = own.get(j.id)
            e["runtime"] = None if rt is None else rt.to_dict()
            e["begin"] = j.not_before if j.not_before is not None and j.not_before > now else None
            e["after"] = sorted({d.job_id for d in j.dependencies
                                 if eng.state_of(d.job_id) in _WAITED})  # fmt: skip
            out[j.id] = e
            if "estimated" not in j.extra:  # (its first estimate: bench and the page's line)
                j.note("estimated", [now, e["start"], e["latest"], e["exact"]])
        return Starts(eng, out, _entry(None, None, (), f"unknown: more than {MOST} jobs ahead"))

    def _durations(
        self, running: list[Job], head: list[Job], now: float
    ) -> tuple[dict[int, float], dict[int, float], dict[int, RunTime]]:
        """The replays' run times by job: likely, late, and the pending jobs' predictions."""
        learned = self.runtimes
        likely: dict[int, float] = {}
        late: dict[int, float] = {}
        own: dict[int, RunTime] = {}
        for j in running:
            rt = learned.predict(j)
            if rt is not None and (a := j.attempt) is not None:
                likely[j.id], late[j.id] = rt.remaining(max(0.0, now - a.start), j.time_limit)
        for j in head:
            rt = learned.predict(j)
            if rt is not None:
                own[j.id] = rt
                likely[j.id], late[j.id] = rt.typical, rt.p90
        return likely, late, own


def _entry(
    start: float | None, end: float | None, gpus: Any, note: str, exact: bool = True
) -> dict[str, Any]:
    known = not note.startswith("unknown")  # (False: nobody can tell)
    return {"start": start, "end": end, "gpus": list(gpus), "exact": exact and known,
            "note": note, "latest": None, "runtime": None, "begin": None, "after": []}  # fmt: skip


def _limited(job: Job, most: float | None) -> Job:
    """A copy of ``job`` whose time limit is the one in force."""
    limits = [t for t in (job.time_limit, most) if t]
    if (min(limits) if limits else None) == job.time_limit:
        return job  # (predict() copies the jobs it is given)
    copy = Job.from_dict(job.to_dict())
    copy.time_limit = min(limits)
    return copy
