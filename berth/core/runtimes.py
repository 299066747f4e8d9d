"""Learned run times: how long a job will run, from how long the same kind of job ran before.

Pure: fed the finished runs (:class:`Run`, as the daemon's history gives them:
:mod:`berth.daemon.engine.history`), one at a time as they end, it keeps the last :data:`KEEP`
run times under each of three keys and predicts a job's run time from the first that has
enough runs:

1. the same user's jobs of the same name (a job's name is ``--name``, else its command's
   file name: ``train.sh``; or the script its interpreter runs, ``python train.py``:
   ``train.py``, :func:`script_of`), at least :data:`MIN_NAMED` runs;
2. that user's jobs of the same shape (GPU count and share), at least :data:`MIN_SHAPE`;
3. the host's (every user's) jobs of that shape, at least :data:`MIN_SHAPE`.

A prediction (:class:`RunTime`) is the median ("typical") and the 90th percentile of those
runs, capped by the job's time limit where it has one, and says what it rests on
(``typical 2:10, p90 3:05, from 14 runs of train.sh``). Only runs that COMPLETED teach: a
failure or a cancel says little of how long the work takes. A prediction only informs the
estimates (and, opted in, backfill); it never ends a job: the time limit does that alone.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from berth.units import format_duration

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from berth.core.job import Job

    Key = tuple[str, str, str]

KEEP = 50  # runs kept per key (the newest)
MIN_NAMED = 2  # runs of the same name that make a prediction
MIN_SHAPE = 3  # runs of the same shape (the user's, then the host's)


@dataclass(frozen=True, slots=True)
class Run:
    """One finished run: whose, its name, its shape (GPUs, share) and how long it ran."""

    user: str
    name: str
    gpus: int
    share: float
    seconds: float


@dataclass(frozen=True, slots=True)
class RunTime:
    """A predicted run time: ``typical`` (the median) and ``p90`` seconds, from ``runs``
    runs of ``basis`` (``train.sh``, ``your 1-GPU jobs``, ``this host's 1-GPU jobs``)."""

    typical: float
    p90: float
    runs: int
    basis: str

    def text(self) -> str:
        return (f"typical {format_duration(self.typical)}, p90 {format_duration(self.p90)}, "
                f"from {self.runs} runs of {self.basis}")  # fmt: skip

    def capped(self, limit: float | None) -> RunTime:
        """The prediction within a time limit (the limit ends the job anyway)."""
        if limit is None or self.p90 <= limit:
            return self
        return RunTime(min(self.typical, limit), limit, self.runs, self.basis)

    def remaining(self, elapsed: float, limit: float | None) -> tuple[float, float]:
        """A running job's run time, likely and late, once it has run ``elapsed`` seconds:
        re-predicted when it outruns the prediction (past the typical: the p90; past that:
        twice what it ran so far), never below ``elapsed``, within ``limit``."""
        if elapsed < self.typical:
            likely, late = self.typical, self.p90
        elif elapsed < self.p90:
            likely = late = self.p90
        else:
            likely = late = 2 * elapsed
        if limit is not None:
            likely, late = min(likely, limit), min(late, limit)
        return likely, late

    def to_dict(self) -> dict[str, object]:
        return {"typical": self.typical, "p90": self.p90, "runs": self.runs,
                "basis": self.basis, "text": self.text()}  # fmt: skip


def unnamed(estimate: dict[str, Any]) -> dict[str, Any]:
    """A start estimate as others see it under ``--private``: its run time without what it
    rests on (a script's name is part of a command)."""
    rt = estimate.get("runtime")
    if not rt:
        return estimate
    said = RunTime(rt["typical"], rt["p90"], rt["runs"], "its kind").text()
    return {**estimate, "runtime": {**rt, "basis": "", "text": said}}


_INTERPRETERS = frozenset((
    "python", "python3", "bash", "sh", "zsh", "perl", "ruby", "node", "Rscript", "julia",
    "torchrun", "accelerate", "deepspeed", "srun", "uv", "poetry", "conda", "env", "nohup",
))  # fmt: skip


def script_of(argv: Sequence[str] | None) -> str | None:
    """What a command runs when its file is an interpreter or launcher (``python train.py
    --lr 1`` -> ``train.py``; ``python -m pkg.train`` -> ``-m pkg.train``), else None: the
    job's name (its command's file name unless ``--name``) says it already."""
    if not argv:
        return None
    exe = argv[0].rsplit("/", 1)[-1]
    if exe not in _INTERPRETERS and not exe.startswith("python"):
        return None
    rest = iter(argv[1:])
    for arg in rest:
        if arg == "-m":
            return f"-m {next(rest, '')}"
        if arg == "-c":
            return None
        if not arg.startswith("-") and "=" not in arg:
            return arg.rsplit("/", 1)[-1] or None
    return None


def what_of(job: Job) -> str:
    """What a job runs, as learning keys it: the script an interpreter runs (admission keeps
    it as ``extra["script"]`` when no ``--name`` is given), else the job's name."""
    script = job.extra.get("script")
    return script if isinstance(script, str) and script else job.name


def shape_of(job: Job) -> tuple[int, float]:
    """A job's shape: how many GPUs, and what share of each."""
    return job.request.count, round(job.request.share, 3)


def run_of(job: Job) -> Run | None:
    """The run a finished job teaches: its last attempt, if it COMPLETED."""
    a = job.attempt
    if a is None or a.end is None or job.state.value != "COMPLETED":
        return None
    count, share = shape_of(job)
    return Run(job.user, what_of(job), count, share, max(0.0, a.end - a.start))


class RunTimes:
    """The run times learned so far; :meth:`add` as runs end, :meth:`predict` per job."""

    __slots__ = ("_cache", "_runs", "added")

    def __init__(self) -> None:
        self._runs: dict[Key, deque[float]] = {}
        self._cache: dict[Key, tuple[float, float, int]] = {}
        self.added = 0  # runs learned (for tests and the dashboard)

    def add(self, run: Run) -> None:
        shape = f"{run.gpus}x{run.share:g}"
        for key in (("n", run.user, run.name), ("s", run.user, shape), ("h", "", shape)):
            kept = self._runs.get(key)
            if kept is None:
                kept = self._runs[key] = deque(maxlen=KEEP)
            kept.append(run.seconds)
            self._cache.pop(key, None)
        self.added += 1

    def predict(self, job: Job, user: str | None = None) -> RunTime | None:
        """The job's predicted run time, capped by its time limit; None: too few runs.
        ``user``: whose runs are its own (default: the job's user; the simulator: tenant)."""
        count, share = shape_of(job)
        user = job.user if user is None else user
        shape = f"{count}x{share:g}"
        what = f"{count}-GPU jobs" if share >= 1 else f"{share:g}-GPU share jobs"
        name = what_of(job)
        for key, least, basis in (
            (("n", user, name), MIN_NAMED, name),
            (("s", user, shape), MIN_SHAPE, f"{user}'s {what}"),
            (("h", "", shape), MIN_SHAPE, f"this host's {what}"),
        ):
            stats = self._stats(key)
            if stats is not None and stats[2] >= least:
                return RunTime(stats[0], stats[1], stats[2], basis).capped(job.time_limit)
        return None

    def _stats(self, key: Key) -> tuple[float, float, int] | None:
        found = self._cache.get(key)
        if found is None:
            kept = self._runs.get(key)
            if not kept:
                return None
            found = self._cache[key] = _median_p90(sorted(kept))
        return found


def _median_p90(xs: list[float]) -> tuple[float, float, int]:
    n = len(xs)
    mid = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    p90 = xs[-(-9 * n // 10) - 1]  # (the nearest rank)
    return mid, max(mid, p90), n
