"""A dry run (``submit`` or ``submit_all`` with ``dry_run``): what would be queued, said after
every check a real submit runs (:mod:`berth.daemon.engine.admission.admit`: the job's fields, this
machine's GPUs, the daemon's and the user's limits, the dependencies resolved, ``--unique``'s
twin, the project, the log directory), and nothing else: no id is given, nothing goes to the
journal, no directory is made. A refusal is the real submit's, word for word.

The answer is the job as the daemon would keep it (``job``: its spec, with the daemon's own
fields: the time limit in force, the project, the dependency with ``@`` resolved), without its
environment (``env_vars`` says how many variables it exports: a dry run's answer is printed,
pasted and shown to agents; the values stay with the caller), the id it would get now
(``would_be``: the next id, unless another job is submitted first), its log files, what stops
it (``limit_in_force``), what its share was sized from (``learned``: no -g, no --mem, and
earlier runs of the same job), and the reason it would wait with where that is known before a pass
(``Held``, ``BeginTime``, ``Dependency``; otherwise the next pass decides).
"""

from __future__ import annotations

from berth.core.states import Reason
from berth.daemon.engine.admission import arrays
from berth.daemon.engine.admission.fitness import limit_in_force
from berth.daemon.engine.admission.userdir import expand_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.daemon.engine.admission.prepared import Caller as Peer
    from berth.daemon.engine.admission.prepared import Prepared
    from berth.daemon.engine.engine import Engine

HIDDEN = ("env", "unique_key")  # (the caller's values; an internal digest)


def reply(engine: Engine, peer: Peer, p: Prepared, job_id: int) -> dict[str, Any]:
    """What a real submit of ``p`` would answer if it got id ``job_id``, marked ``dry_run``
    (a ``--unique`` twin: the twin's answer)."""
    if p.dup is not None:
        return {**p.dup, "dry_run": True}
    spec = p.spec
    job = {k: v for k, v in spec.to_dict().items() if k not in HIDDEN}
    out: dict[str, Any] = {"dry_run": True, "would_be": job_id, "job": job,
                           "env_vars": len(spec.env), "gpus": p.request.gpu_amount}  # fmt: skip
    out.update(limit_in_force(spec.time_limit, engine.opts.max_job_time))
    where: tuple[int, int | str] | None = None
    if p.array:
        order = arrays.indices(p.array)[0]
        out["array"] = p.array
        out["tasks"] = [f"{job_id}_{i}" for i in order]
        where = (job_id, "%a")
    out["stdout"] = expand_pattern(p.out, job_id, spec.cwd, peer.user, where)
    out["stderr"] = expand_pattern(p.err, job_id, spec.cwd, peer.user, where)
    if p.learned is not None:
        out["learned"] = p.learned  # (its share sized from earlier runs: learned.py)
    reason = _reason(p, engine.clock.time())
    if reason is not None:
        out["reason"] = reason.value
    return out


def replies(engine: Engine, peer: Peer, prepared: list[Prepared]) -> list[dict[str, Any]]:
    """``submit_all``'s dry run: each job's answer, ids given in turn from the next one (a
    line that repeats an earlier one of the batch: that one's answer, as a real submit)."""
    out: list[dict[str, Any]] = []
    job_id = engine.next_id
    for p in prepared:
        if p.dup is not None and "twin_of" in p.dup:
            first = out[p.dup["twin_of"]]
            out.append({**first, "duplicate": True, "state": "PENDING"})
            continue
        out.append(reply(engine, peer, p, job_id))
        if p.dup is None:
            job_id += p.count
    return out


def _reason(p: Prepared, now: float) -> Reason | None:
    """The reason the job would wait with from the start, where no pass is needed to know."""
    if p.spec.hold:
        return Reason.HELD
    if p.spec.begin and p.spec.begin > now:
        return Reason.BEGIN_TIME
    if p.deps:
        return Reason.DEPENDENCY
    return None
