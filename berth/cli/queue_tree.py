"""`berth queue --tree`: the queue as a tree of dependencies (as gflow's ``gqueue -t``).

Each job is a line with its state; a job that depends on jobs of the list is drawn under the
first of them (the lowest id), with its dependency as written and, for the jobs it names
that the list does not show (ended ones; `--all` shows them too), their states::

    JOBID       NAME    ST  NODELIST(REASON)  DEPENDENCY
    12          prep    R   gpu:0
    ├─13        train   PD  (Dependency)      afterok:12
    │ └─15      eval    PD  (Dependency)      afterok:13,afterany:9 [9 COMPLETED]
    └─14        report  PD  (Dependency)      afterany:12
    16          sweep   PD  (Dependency)      singleton
"""

from __future__ import annotations

from berth.cli.escape import shown
from berth.state_codes import CODES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.backends.base import JobInfo


def _raw(r: JobInfo) -> str:
    return str(r.extra.get("raw_id") or r.id)


def format_tree(rows: list[JobInfo], states: dict[str, str | None], header: bool = True) -> str:
    """The tree of ``rows`` (the daemon's `queue` answer); ``states``: the state of each job
    a shown job depends on (its ``dependency_states``), None for a job no longer on record."""
    by_id = {_raw(r): r for r in rows}
    children: dict[str, list[JobInfo]] = {}
    roots: list[JobInfo] = []
    for r in rows:
        parents = [str(i) for i in r.extra.get("depends_on") or () if str(i) in by_id]
        parents = [p for p in parents if p != _raw(r)]
        if parents:
            children.setdefault(min(parents, key=int), []).append(r)
        else:
            roots.append(r)
    lines: list[tuple[str, ...]] = [("JOBID", "NAME", "ST", "NODELIST(REASON)", "DEPENDENCY")]
    seen: set[str] = set()

    def walk(r: JobInfo, lead: str, branch: str) -> None:
        seen.add(_raw(r))
        lines.append((branch + r.id, *_cells(r, by_id, states)))
        kids = children.get(_raw(r), [])
        for k, child in enumerate(kids):
            last = k == len(kids) - 1
            if _raw(child) not in seen:
                walk(child, lead + ("  " if last else "│ "), lead + ("└─" if last else "├─"))

    for r in roots:
        walk(r, "", "")
    for r in rows:  # (none left unless the daemon sent a loop; shown all the same)
        if _raw(r) not in seen:
            walk(r, "", "")
    widths = [max(len(line[i]) for line in lines) for i in range(4)]
    out = [
        " ".join(c.ljust(w) for c, w in zip(line[:4], widths, strict=True)) + "  " + line[4]
        for line in lines
    ]
    if not header:
        out.pop(0)
    return "".join(line.rstrip() + "\n" for line in out)


def _cells(
    r: JobInfo, by_id: dict[str, JobInfo], states: dict[str, str | None]
) -> tuple[str, str, str, str]:
    where = f"({r.reason or 'None'})" if r.state == "PENDING" else r.where
    dep = str(r.extra.get("dependency") or "")
    hidden = [str(i) for i in r.extra.get("depends_on") or () if str(i) not in by_id]
    if hidden:
        dep += " [" + ", ".join(f"{i} {states.get(i) or 'gone'}" for i in hidden) + "]"
    return shown(r.name)[:20], CODES.get(r.state, "?"), where, dep
