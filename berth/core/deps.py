"""Dependencies (sbatch's ``--dependency``): satisfied, waiting, or never to be satisfied.

A job's dependency is its terms (:class:`~berth.dependency.Dependency`, resolved: job ids), all needed, or with
``Job.dependency_any`` (sbatch's ``?``) any one. A term on a whole array (``array`` set) is
all its tasks together, one alternative. Each term is, against the jobs known:

- ``after:J``: satisfied once J has started (a requeued job counts as started) or ended
  without starting; ``after:J+M``: M minutes after J's first start.
- ``afterany:J``: once J ended. ``afterok:J``: once J COMPLETED; never if it ended otherwise.
  ``afternotok:J``: once J ended otherwise; never if it COMPLETED.
- ``singleton``: once no other job of the same user with the same name is running, nor
  pending ahead of it (a lower id): such jobs run one at a time, in submission order.

A job that failed and is retried (``--retry-oom``: a new job queued with more GPU memory) is
not its terms' last word: ``afterok``/``afterany``/``afternotok`` on it wait while the daemon
looks at whether it is retried (``Finished.retried``: None), then read its retry's outcome
(the new id), as a Slurm job requeued keeps its dependents waiting.

A term on a job nobody knows is never satisfied. *Never* for the whole dependency: one term
never met (all of), or every alternative never met (any of). The pass cancels such a job
with the reason ``DependencyNeverSatisfied`` (as Slurm with ``--kill-on-invalid-dep=yes``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from berth.core.job import Job
from berth.core.states import FINISHED, State
from berth.dependency import SINGLETON, Dependency

OK, WAIT, NEVER = "ok", "wait", "never"

Verdict = tuple[str, str, "float | None"]  # (OK | WAIT | NEVER, detail, wake-up time)


class Finished(dict[int, State]):
    """Finished jobs' states (what dependencies may name), and ``retried``: a failed job ->
    the job that retries it, or None while it is not yet known whether one will."""

    __slots__ = ("retried",)

    def __init__(self) -> None:
        super().__init__()
        self.retried: dict[int, int | None] = {}


class Known:
    """What dependencies may look at in one pass: every job's state (pending, running and
    finished ones), when each job that ran first started, and (for ``singleton``, built at
    first need) the unfinished jobs by user and name."""

    __slots__ = ("_unfinished", "by_name", "retried", "starts", "states")

    def __init__(
        self, pending: Iterable[Job], running: Iterable[Job], done: Mapping[int, State] | None
    ) -> None:
        self.states: dict[int, State] = dict(done or {})
        self.retried: dict[int, int | None] = done.retried if isinstance(done, Finished) else {}
        self.starts: dict[int, float] = {}
        self._unfinished: list[Job] = []
        for j in (*pending, *running):
            self.states[j.id] = j.state
            self._unfinished.append(j)
            if j.attempts:
                self.starts[j.id] = j.attempts[0].start
        self.by_name: dict[tuple[str, str], list[Job]] | None = None

    def named(self, user: str, name: str) -> list[Job]:
        """The unfinished jobs of ``user`` called ``name``."""
        if self.by_name is None:
            self.by_name = {}
            for j in self._unfinished:
                self.by_name.setdefault((j.user, j.name), []).append(j)
        return self.by_name.get((user, name), [])


class Lazy:
    """What dependencies see in one pass (:class:`Known`), built at first need: the pass's
    gate asks it, and ``guarded``'s overdue job may be one whose dependencies are met."""

    __slots__ = ("_inputs", "_known", "now")

    def __init__(
        self, pending: Iterable[Job], running: Iterable[Job], done: Mapping[int, State] | None,
        now: float,
    ) -> None:  # fmt: skip
        self._inputs = (pending, running, done)
        self._known: Known | None = None
        self.now = now

    def get(self) -> Known:
        if self._known is None:
            self._known = Known(*self._inputs)
        return self._known

    def met(self, job: Job) -> bool:
        """Whether ``job``'s dependencies are met now."""
        return check(job, self.get(), self.now)[0] == OK


def check(job: Job, known: Known, now: float = 0.0) -> Verdict:
    """(``OK`` | ``WAIT`` | ``NEVER``, detail, when to look again or None) for ``job``'s
    dependency."""
    groups: dict[tuple[str, int, int], list[Dependency]] = {}
    for d in job.dependencies:
        groups.setdefault(d.group, []).append(d)
    results = [_group(job, terms, known, now) for terms in groups.values()]
    never = [r for r in results if r[0] == NEVER]
    waiting = [r for r in results if r[0] == WAIT]
    wakes = [r[2] for r in waiting if r[2] is not None]
    wake = min(wakes) if wakes else None
    if job.dependency_any and len(results) > 1:
        if any(r[0] == OK for r in results):
            return OK, "", None
        if not waiting:
            return NEVER, "none of them can be met: " + "; ".join(r[1] for r in never), None
        return WAIT, "waiting for any of " + ", ".join(r[1] for r in waiting), wake
    if never:
        return never[0]
    if waiting:
        return WAIT, "waiting for " + ", ".join(r[1] for r in waiting), wake
    return OK, "", None


def _group(job: Job, terms: list[Dependency], known: Known, now: float) -> Verdict:
    """One alternative: a term, or a whole array's terms (all needed)."""
    waiting: list[str] = []
    wakes: list[float] = []
    for d in terms:
        verdict, detail, wake = _term(job, d, known, now)
        if verdict == NEVER:
            return verdict, detail, None
        if verdict == WAIT:
            waiting.append(detail)
            if wake is not None:
                wakes.append(wake)
    if waiting:
        return WAIT, ", ".join(waiting), min(wakes) if wakes else None
    return OK, "", None


def _term(job: Job, dep: Dependency, known: Known, now: float) -> Verdict:
    if dep.kind == SINGLETON:
        return _singleton(job, known)
    shown = f"{dep.kind}:{dep.job_id}" + (f"+{dep.minutes}" if dep.minutes else "")
    target = dep.job_id
    st = known.states.get(target)
    if st is None:
        return NEVER, f"{shown}: job {target} does not exist", None
    done = st in FINISHED
    if dep.kind == "after":
        start = known.starts.get(target)
        if st is State.PENDING and start is None:
            return WAIT, shown, None
        if dep.minutes and start is not None and not done:
            at = start + dep.minutes * 60
            if at > now:
                return WAIT, shown, at
        return OK, "", None
    while done and target in known.retried:  # it failed, and is (or may be) run again
        again = known.retried[target]
        if again is None:
            return WAIT, f"{shown} (job {target} died of CUDA out of memory: retried?)", None
        target = again
        shown = f"{dep.kind}:{dep.job_id} (retried as job {target})"
        st = known.states.get(target, State.PENDING)  # (its row may not be written yet)
        done = st in FINISHED
    if not done:
        return WAIT, shown, None
    if dep.kind == "afterok" and st is not State.COMPLETED:
        return NEVER, f"{shown}: job {target} ended {st.value}", None
    if dep.kind == "afternotok" and st is State.COMPLETED:
        return NEVER, f"{shown}: job {target} COMPLETED", None
    return OK, "", None


def _singleton(job: Job, known: Known) -> Verdict:
    for other in known.named(job.user, job.name):
        if other.id == job.id or other.state in FINISHED:
            continue
        if other.state is not State.PENDING or other.id < job.id:
            return WAIT, f"singleton (job {other.id} of that name is {other.state.value})", None
    return OK, "", None
