"""The queue view (the `queue` request's answer, :mod:`berth.daemon.requests.queueview`): the
jobs as `berth queue` lists them, whole or just its head, in frames.

Lines, in order: the running (and completing) jobs, the pending ones in the order the last
explaining pass considered them (:mod:`berth.daemon.engine.explaining`), then (``all``) the
jobs that ended in the last day. With ``fold`` an array's pending tasks are one line, where
its first pending task is, whose row carries ``array_tasks`` (every pending task of the array
that the filters keep, however far down the queue). ``limit`` (a number of lines): only the
first lines, and the explaining pass stops once it has explained them, so a terminal's
screenful of a 100,000-job queue costs the daemon the jobs it shows; ``left`` counts, by
state, the jobs the filters keep that no line shows (exact: a count, no explanation).

The frames (streamed by the request, :class:`berth.daemon.requests.stream.Stream`): a head
(``daemon``, ``users``, ``projects``, ``fairshare``, ``reservations``, ``estimates``: how
good the last week's start estimates were, :mod:`berth.daemon.engine.accuracy`; ``total``), then the
rows in frames of at most :data:`CHUNK` (``{"jobs": [...]}``, nothing else), then
``{"end": true, "dependency_states": ..., "left": ...}``. Each frame is rendered when the
connection is ready for it (the writer awaits the client's reading between frames), so the
daemon holds one frame of a long answer at a time, whoever asks. Which jobs: a
:class:`Selection` (the request's, checked there); whose command a caller may see: ``see``.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter

from berth.claims.procs import user_name
from berth.core.fairshare import FairShare
from berth.core.job import Job
from berth.core.policy import DEFAULT_POLICY
from berth.core.runtimes import unnamed
from berth.core.states import FINISHED, State
from berth.daemon.engine import views

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any, Protocol

    from berth.daemon.engine.engine import Engine
    from berth.daemon.engine.estimates import Starts

    class Selection(Protocol):
        """What a `queue` request asks for: which jobs, how many lines, folded, models."""

        uid: int | None
        limit: int | None
        fold: bool
        model: bool
        finished: bool

        def wants(self, job: Job) -> bool: ...

    Line = tuple[Job, "list[int] | None"]  # a job's row; the tasks folded into it

CHUNK = 2000  # rows per frame of a streamed answer
_ORDER = {State.RUNNING: 0, State.COMPLETING: 1, State.PENDING: 2}


class Head:
    """``Inputs.explain_stop`` for the first ``need`` pending lines that ``sel`` keeps."""

    def __init__(self, need: int, sel: Selection) -> None:
        self.need, self.sel = need, sel
        what = getattr(sel, "key", None)  # (a pass run for the same head covers it)
        self.key = None if what is None else ("head", need, what)
        self.lines = 0
        self.arrays: set[int] = set()

    def __call__(self, job: Job) -> bool:
        array = job.extra.get("array") if self.sel.fold else None
        if array and array[0] in self.arrays:
            pass  # (its array's line is counted: the rest of a long array, not asked)
        elif self.sel.wants(job):
            self.lines += 1
            if array:
                self.arrays.add(array[0])
        return self.lines >= self.need


def daemon_info(engine: Engine) -> dict[str, Any]:
    """Which daemon this is (`berth queue` says which one answered)."""
    opts = engine.opts
    return {
        "pid": os.getpid(),
        "socket": opts.socket,
        "system": opts.system,
        "user": user_name(os.geteuid()),
        "private": opts.private,
        "admins": opts.admins(),
        "policy": opts.policy or DEFAULT_POLICY,  # (what `simulate --what-if` replays with)
        "max_job_time": opts.max_job_time,  # (and the cap it replays every job's limit with)
    }


def frames(engine: Engine, sel: Selection, see: Callable[[Job], bool]) -> Iterator[dict[str, Any]]:
    """The head, the rows in frames of at most :data:`CHUNK`, the end."""
    lines, counts = _lines(engine, sel)
    now = engine.clock.time()
    acc = engine.accounts
    users = acc.summary(engine.unfinished(), now)
    yield {
        "daemon": daemon_info(engine),
        "users": users,
        "projects": acc.projects.summary(engine.unfinished(), now),
        "fairshare": {"enabled": acc.enabled, "half_life": _finite(acc.book.half_life),
                      **_projects_level(engine, now)},
        "reservations": engine.reservations.view(now),
        "estimates": engine.estimates.accuracy.summary(now),  # (how good, the last week)
        "total": sum(counts.values()),
    }
    factors = {u["user"]: u["factor"] for u in users}
    named: set[int] = set()
    shown: Counter[str] = Counter()
    ids = views.TaskIds(engine.jobs)  # (reasons name array tasks as 17_1)
    seen: dict[str, str] = {}  # reasons as rewritten so
    it = iter(lines)
    starts: Starts | None = None  # (one look at the estimates: its key is O(queue))
    while chunk := list(itertools.islice(it, CHUNK)):
        if starts is None and any(j.state is State.PENDING for j, _ in chunk):
            starts = engine.estimates.get()
        rows = []
        for job, tasks in chunk:
            r = _row(engine, see, sel, job, ids, factors, starts, seen)
            if tasks is not None:
                r["array_tasks"] = sorted(tasks)
            shown[job.state.value] += 1 if tasks is None else len(tasks)
            named.update(r["depends_on"])
            rows.append(r)
        yield {"jobs": rows}
    left = {s: n - shown[s] for s, n in counts.items() if n > shown[s]}
    yield {
        "end": True,
        "dependency_states": {str(i): getattr(engine.state_of(i), "value", None) for i in named},
        "left": left,
    }


def _row(
    engine: Engine, see: Callable[[Job], bool], sel: Selection, job: Job, ids: views.TaskIds,
    factors: dict[str, float], starts: Starts | None, seen: dict[str, str],
) -> dict[str, Any]:  # fmt: skip
    pending = job.state is State.PENDING
    reason = engine.reason(job.id) if pending else None
    if reason is not None:  # (many rows share one reason: rewritten once)
        said = seen.get(reason)
        if said is None:
            said = seen[reason] = views.with_task_ids(reason, ids) or reason
        reason = said
    r = views.row(job, reason)
    if pending:  # its place in line and what puts it there (priority, fair share, wait)
        place = engine.considered.get(job.id)
        r["order"] = None if place is None else place + 1
        r["share_factor"] = factors.get(job.tenant)
        r["queued_at"] = job.queue_time
        est = starts.get(job.id) if starts is not None else None
        r["start_estimate"] = est if est is None or see(job) else unnamed(est)
    if sel.model and job.state not in FINISHED:  # (`simulate --what-if`)
        model = {k: v for k, v in job.to_dict().items() if k != "extra"}
        r["model"] = model if see(job) else views.redact(model)
    return r


def _lines(engine: Engine, sel: Selection) -> tuple[list[Line], Counter[str]]:
    """The lines to send, and how many jobs ``sel`` keeps by state."""
    counts: Counter[str] = Counter()
    active: list[Job] = []
    tasks: dict[int, list[int]] = {}  # fold: array -> its pending tasks kept
    singles = 0  # pending jobs kept that are a line each
    wants, fold = sel.wants, sel.fold
    for job in engine.unfinished():
        if not wants(job):
            continue
        counts[job.state._value_] += 1  # (not the enum's property: every job, every screen)
        if job.state is not State.PENDING:
            active.append(job)
        elif fold and (array := job.extra.get("array")):
            tasks.setdefault(array[0], []).append(array[1])
        else:
            singles += 1
    active.sort(key=lambda j: (_ORDER.get(j.state, 3), -j.priority, j.queue_time, j.id))
    limit = sel.limit
    lines: list[Line] = [(j, None) for j in active[:limit]]
    room = None if limit is None else limit - len(lines)
    if counts[State.PENDING.value] and room != 0:
        # (every pending line there is, when fewer than the room: the screen is full once
        # each is explained, an array's line by its first task)
        need = None if room is None else min(room, singles + len(tasks))
        engine.explain(None if need is None else (lambda: Head(need, sel)))
        lines += _pending(engine, sel, tasks, need)
    if sel.finished and room != 0:
        room = None if limit is None else limit - len(lines)
        for job in _ended(engine, sel):
            counts[job.state.value] += 1
            if room is None or room > 0:
                lines.append((job, None))
                room = None if room is None else room - 1
    return lines, counts


def _pending(
    engine: Engine, sel: Selection, tasks: dict[int, list[int]], room: int | None
) -> list[Line]:
    """The first ``room`` (None: all) pending lines ``sel`` keeps, in the order of the last
    explaining pass (the jobs it did not reach after: by priority, then queue time)."""
    jobs = engine.jobs
    considered = engine.considered

    def rest() -> Iterator[Job]:  # (a paused queue: nothing considered)
        left = [j for j in jobs.values() if j.state is State.PENDING and j.id not in considered]
        yield from sorted(left, key=lambda j: (-j.priority, j.queue_time, j.id))

    memo: dict[object, list[int]] | None = getattr(considered, "lines", None)  # (found once)
    what = getattr(sel, "key", None)
    key = None if memo is None or what is None or room is None else (room, what)
    if key is not None and memo is not None and key in memo:
        again = [jobs.get(i) for i in memo[key]]
        if all(j is not None and j.state is State.PENDING and sel.wants(j) for j in again):
            return [(j, _tasks(j, sel, tasks)) for j in again if j is not None]
    ahead = (jobs.get(i) for i in considered)
    out: list[Line] = []
    folded: set[int] = set()
    fold = sel.fold
    for job in itertools.chain(ahead, rest()):
        if room is not None and len(out) >= room:
            break
        if job is None:
            continue
        array = job.extra.get("array") if fold else None
        if array and array[0] in folded:
            continue  # (its array's line is out already: a long array's tasks, not asked)
        if job.state is not State.PENDING or not sel.wants(job):
            continue
        if array:
            folded.add(array[0])
        out.append((job, tasks.get(array[0]) if array else None))
        if room is not None and len(out) >= room:
            if key is not None and memo is not None and job.id in considered:
                memo[key] = [j.id for j, _ in out]  # (all of them in the pass's order)
            break  # (not after the next: the jobs not considered are sorted first)
    return out


def _tasks(job: Job, sel: Selection, tasks: dict[int, list[int]]) -> list[int] | None:
    """The pending tasks folded into ``job``'s line (None: a line of its own)."""
    array = job.extra.get("array") if sel.fold else None
    return tasks.get(array[0]) if array else None


def _ended(engine: Engine, sel: Selection) -> Iterator[Job]:
    """The jobs that ended in the last day (those ending now first), as ``sel`` keeps them."""
    since = engine.clock.time() - 86400
    settling = engine.settling_jobs()
    ending = {j.id for j in settling}
    records = (Job.from_dict(d) for d in engine.store.finished_since(since, sel.uid)
               if d["id"] not in ending)  # fmt: skip
    return (j for j in itertools.chain(settling, records) if sel.wants(j))


def _projects_level(engine: Engine, now: float) -> dict[str, Any]:
    """Fair share's upper level when the daemon has projects (what `simulate --what-if`
    replays, as the passes order): each project's decayed GPU-seconds (running jobs so far;
    "" the jobs naming none) and shares; nothing without projects."""
    projects = engine.accounts.projects
    if not projects.any:
        return {}
    fair = projects.fair(FairShare(), engine.unfinished(), now)
    return {"project_usage": dict(fair.project_usage), "project_shares": dict(fair.project_shares)}


def _finite(x: float) -> float | None:
    return x if x != float("inf") else None
