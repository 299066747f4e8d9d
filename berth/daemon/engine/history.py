"""What the daemon's finished jobs teach: the one query of the store's finished jobs for what
they ran (how long, in which shape) and what they used (their sampled peak GPU memory), read
once when the daemon starts; from then on each job is learned as it ends (no scan per pass).

The start estimates learn run times from it (:mod:`berth.core.runtimes`, through
:class:`berth.daemon.engine.estimates.Estimates`); learned GPU memory may read ``peak_mem``
from the same rows. The jobs table keeps ``[daemon] keep_finished`` of history (30 days by
default); at most :data:`MOST` of the newest finished jobs are read.
"""

from __future__ import annotations

from dataclasses import dataclass

from berth.core.runtimes import Run

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

    from berth.daemon.store.store import Store

MOST = 20_000  # finished jobs read at start (the newest)

_SQL = """
    SELECT jobs.id, jobs.user,
           coalesce(json_extract(data, '$.extra.script'), json_extract(data, '$.name')),
           json_extract(data, '$.request.gpus'), json_extract(data, '$.request.each'),
           json_extract(data, '$.attempts[#-1].start'), json_extract(data, '$.attempts[#-1].end'),
           jobs.state, job_usage.peak_mem, jobs.ended_at,
           json_extract(data, '$.attempts[0].start'), json_extract(data, '$.extra.estimated')
    FROM jobs LEFT JOIN job_usage ON job_usage.id = jobs.id
    WHERE jobs.state NOT IN ('PENDING', 'RUNNING', 'COMPLETING') AND ended_at IS NOT NULL
    ORDER BY ended_at DESC LIMIT ?
"""


@dataclass(frozen=True, slots=True)
class Finished:
    """One finished job as the history reads it: what it ran (``name``: the script its
    interpreter ran, else its name: :func:`berth.core.runtimes.what_of`), its last attempt's ``start`` and ``end``
    (None: it never ran), its end ``state``, its sampled ``peak_mem`` (bytes, None: not
    sampled), when it ended, when its first attempt started (``first``) and the start
    estimate made when it was submitted (``estimated``: its JSON text, or None)."""

    id: int
    user: str
    name: str
    gpus: float
    each: float
    start: float | None
    end: float | None
    state: str
    peak_mem: float | None
    ended: float
    first: float | None
    estimated: str | None

    def run(self) -> Run | None:
        """The run it teaches (:func:`berth.core.runtimes.run_of`): a COMPLETED attempt."""
        if self.state != "COMPLETED" or self.start is None or self.end is None:
            return None
        count = int(self.gpus) if self.gpus >= 1 else (1 if self.gpus > 0 else 0)
        share = self.each if self.gpus >= 1 else self.gpus
        return Run(self.user, self.name, count, round(share, 3), max(0.0, self.end - self.start))


def finished(store: Store, most: int = MOST) -> Iterator[Finished]:
    """The newest ``most`` finished jobs, oldest first."""
    rows = store.db.execute(_SQL, (most,)).fetchall()
    for r in reversed(rows):
        try:
            yield Finished(
                int(r[0]), str(r[1]), str(r[2] or ""), float(r[3] if r[3] is not None else 1),
                float(r[4] if r[4] is not None else 1.0),
                None if r[5] is None else float(r[5]), None if r[6] is None else float(r[6]),
                str(r[7]), None if r[8] is None else float(r[8]), float(r[9]),
                None if r[10] is None else float(r[10]), None if r[11] is None else str(r[11]),
            )  # fmt: skip
        except (TypeError, ValueError):
            continue  # (a damaged row teaches nothing)
