"""When each pending job is expected to start: the one estimate `berth queue --start`,
`berth show`, `berth queue --json` and the dashboard all show.

It is :func:`berth.sim.whatif.predict` (the queue replayed forward with the core's
``schedule()``, every job running until its time limit) fed with what the daemon's own passes
see: its inventory, the GPUs' outside use (claims, waiters, processes outside berth), the
drained GPUs, the policy, fair share and the users' limits. A job's time limit is the one in
force (its ``-t``, or the daemon's ``--max-job-time`` when smaller).

It is computed again only when the queue changes (a job joins, starts, ends, is held,
released or re-prioritised, a GPU is drained or resumed, outside use comes or goes) or a
minute has passed, at most every :data:`MIN_AGE` seconds while the queue keeps changing (but
at once for a job not estimated yet), and for at most :data:`MOST` pending jobs in the
policy's order (later ones read "unknown"): a long queue costs the daemon one replay per
change, not one per viewer or request.

Each estimate is ``{"start": time or None, "end": time or None, "gpus": [...], "exact": bool,
"note": ...}``.
``start`` is None when it cannot be told: a job ahead (running, or expected to start first)
has no time limit, so nobody knows when it ends ("unknown"); the job is held; it cannot start
with the GPUs as they are; the queue is paused.
"""

from __future__ import annotations

import heapq

from berth.core.job import Job
from berth.core.policy import DEFAULT_POLICY, order_key
from berth.core.states import State
from berth.sim.whatif import predict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine.host import Host

MOST = 300  # pending jobs estimated (in the policy's order): ~0.1 s of replay on 8 GPUs
MAX_AGE = 60.0  # seconds an estimate is kept when nothing changes
MIN_AGE = 2.0  # seconds between two replays while the queue keeps changing (a new job: at once)
UNKNOWN = "unknown: a job ahead has no time limit"


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
    """The daemon's start estimates, kept until the queue changes."""

    def __init__(self, engine: Host) -> None:
        self.engine = engine
        self._key = 0  # (a hash of what the estimates depend on: not the queue's copy)
        self._at = float("-inf")
        self._top = 0  # the newest pending job when they were computed
        self._out = Starts(engine, {}, _entry(None, None, (), UNKNOWN))
        self.computed = 0  # how many times they were computed (for tests)

    def get(self) -> Starts:
        """The estimate of every pending job (:meth:`Starts.get`)."""
        eng = self.engine
        now = eng.clock.time()
        others = eng.outside_usage()
        key = hash((
            tuple(
                (j.id, j.state.value, len(j.attempts), j.held, j.priority, j.time_limit)
                for j in eng.unfinished()
            ),
            tuple(sorted(eng.pauses.indexes())),
            eng.pauses.queue,
            tuple(eng.reservations.entries),
            tuple(sorted((i, u.share, u.mem, u.busy) for i, u in others.items())),
        ))  # fmt: skip
        age = now - self._at
        top = max((j.id for j in eng.unfinished() if j.state is State.PENDING), default=0)
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
        pending = heapq.nsmallest(  # (the head only: O(queue), not a sort of it)
            MOST,
            (j for j in eng.unfinished() if j.state is State.PENDING),
            key=lambda j: order_key(j, policy, now),
        )
        most = eng.opts.max_job_time
        running = [
            _limited(j, most)
            for j in eng.unfinished()
            if j.state in (State.RUNNING, State.COMPLETING)
        ]
        head = [_limited(j, most) for j in pending]
        fair = eng.accounts.fair(running, now)
        preds = predict(
            head, running, eng.res.inventory, now, others=others,
            paused=eng.pauses.indexes(), policy=policy, done=eng.finished_states,
            usage=None if fair is None else dict(fair.usage),
            shares=None if fair is None else dict(fair.shares),
            half_life=eng.accounts.book.half_life, limits=eng.accounts.user_limits(),
            reservations=eng.reservations.windows(now),
        )  # fmt: skip
        out: dict[int, dict[str, Any]] = {}
        for j in pending:
            p = preds.get(j.id)
            if p is None:
                continue  # (the shared entry)
            elif p.start is not None and not p.exact and p.start > now + 1:
                out[j.id] = _entry(None, None, (), UNKNOWN)
            else:
                out[j.id] = _entry(p.start, p.end, p.gpus, "" if p.start is not None else p.note)
        return Starts(eng, out, _entry(None, None, (), f"unknown: more than {MOST} jobs ahead"))


def _entry(start: float | None, end: float | None, gpus: Any, note: str) -> dict[str, Any]:
    exact = not note.startswith("unknown")  # (False: nobody can tell)
    return {"start": start, "end": end, "gpus": list(gpus), "exact": exact, "note": note}


def _limited(job: Job, most: float | None) -> Job:
    """A copy of ``job`` whose time limit is the one in force."""
    limits = [t for t in (job.time_limit, most) if t]
    if (min(limits) if limits else None) == job.time_limit:
        return job  # (predict() copies the jobs it is given)
    copy = Job.from_dict(job.to_dict())
    copy.time_limit = min(limits)
    return copy
