"""A submitted job's ``dependency`` (:mod:`berth.dependency`) made into the scheduler's
terms (:class:`berth.dependency.Dependency`, resolved: each a job's id): ``@`` is the caller's last submitted job, found
from who is calling (the socket's uid, never the message); ``12_3`` is that task's job; an
array's id stands for all its tasks (one alternative under ``?``); every job named must be
on record, else the job is refused (as Slurm refuses an unknown id) and nothing is queued.
"""

from __future__ import annotations

from berth.daemon.engine.admission import arrays
from berth.dependency import LAST, SINGLETON, Dependency, parse_dependency
from berth.errors import UsageError
from berth.wire import protocol
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.daemon.engine.admission.prepared import Caller as Peer
    from berth.daemon.engine.engine import Engine


def last_job(engine: Engine, uid: int) -> int | None:
    """The newest job of user ``uid``: in memory (accepted, maybe not yet committed) or on
    record."""
    ids = [j.id for j in engine.unfinished() if j.uid == uid]
    ids += [j.id for j in engine.settling_jobs() if j.uid == uid]
    stored = engine.store.last_job(uid)
    if stored is not None:
        ids.append(stored)
    return max(ids) if ids else None


def resolve(engine: Engine, peer: Peer, text: str) -> tuple[tuple[Dependency, ...], bool, str]:
    """(terms, any of them, the text with ``@`` replaced) of the dependency ``text``."""
    try:
        dep = parse_dependency(text)
    except UsageError as e:  # (JobSpec checked it already)
        raise ProtocolError(protocol.BAD_REQUEST, f"{e}; nothing was queued") from None
    if LAST in dep.jobs():
        last = last_job(engine, peer.uid)
        if last is None:
            raise ProtocolError(
                protocol.NO_SUCH_JOB,
                f"dependency {text}: @ is your last submitted job, and {peer.user} has none "
                "on record here; name the job by its id",
            )
        dep = dep.with_jobs(lambda j: str(last) if j == LAST else j)
    terms: list[Dependency] = []
    for t in dep.terms:
        if t.kind == SINGLETON:
            terms.append(Dependency(SINGLETON))
            continue
        if "_" in t.job:  # one task of an array
            terms.append(Dependency(t.kind, arrays.resolve(engine, t.job, "dependency"),
                                    t.minutes))  # fmt: skip
            continue
        job_id = int(t.job)
        if engine.state_of(job_id) is None:
            raise ProtocolError(protocol.NO_SUCH_JOB, f"dependency {t}: no job {job_id}")
        tasks = arrays.members(engine, job_id)
        if tasks:
            terms += [Dependency(t.kind, i, t.minutes, array=job_id) for i in tasks]
        else:
            terms.append(Dependency(t.kind, job_id, t.minutes))
    return tuple(dict.fromkeys(terms)), dep.any_of, str(dep)


def text_of(terms: tuple[Dependency, ...], any_of: bool) -> str | None:
    """The dependency ``terms`` written back as sbatch writes them (an array's tasks as the
    array's id), or None for none: what ``queue --tree``, ``--json`` and ``show`` print."""
    words: dict[str, None] = {}
    for d in terms:
        if d.kind == SINGLETON:
            words[SINGLETON] = None
            continue
        plus = f"+{d.minutes}" if d.minutes else ""
        words[f"{d.kind}:{d.array or d.job_id}{plus}"] = None
    return ("?" if any_of else ",").join(words) or None
