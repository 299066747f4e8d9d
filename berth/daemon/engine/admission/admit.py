"""Accepting a job (the ``submit`` request): read it as a :class:`~berth.wire.jobspec.JobSpec`
(every field and the rules between them; the client ran the same checks, but is not trusted),
check it against this machine, apply ``--unique`` (:mod:`.unique`) or ``once`` (a key `berth
watch` gives each line it reads: a job with that key, in any state, is that line's job, so a
line is queued once even if the watcher dies between sending it and noting it), fix its log
paths, and add it to the queue, or all the tasks of an ``--array`` (:mod:`.arrays`) in one
commit; the answer comes once the job is durable. ``submit_all`` takes a jobs file's jobs:
every one is checked before any is queued, then all go in one commit. A time limit above the
daemon's ``max_job_time`` is refused here (not cut: the user learns the limit before the job
is queued). With ``dry_run``, either runs every one of these checks and answers what it would
queue (:mod:`.dryrun`), with no side effect: no id given, nothing written, no directory made.

What one request may cost is bounded (:meth:`~berth.daemon.engine.accounts.Accounts.check_request`):
a job's environment, an array's tasks, the jobs of one request, a job's bytes
(``max_job_bytes``, :mod:`berth.wire.jobsize`); and the user's jobs queued or running
(``max_jobs``) and the bytes they keep in the store (``max_user_bytes``), both kept by the
engine's :class:`~berth.daemon.engine.jobtable.JobTable` (``Job.extra["bytes"]``).
"""

from __future__ import annotations

import asyncio
import hashlib
import os

from berth.claims.procs import user_name
from berth.core.job import Job
from berth.core.request import Request
from berth.daemon.engine.admission import arrays, depends, dryrun, fitness, learned, made, unique
from berth.daemon.engine.admission.envs import kept, same_env
from berth.daemon.engine.admission.prepared import Prepared
from berth.daemon.engine.admission.userdir import log_dir as user_log_dir
from berth.daemon.engine.cpuslots import CPU_SLOT
from berth.daemon.store.tasks import Tasks
from berth.wire import protocol
from berth.wire.jobsize import check_job_bytes, env_bytes, sizes
from berth.wire.jobspec import JobSpec, one_machine
from berth.wire.protocol import ProtocolError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable
    from typing import Any

    from berth.daemon.engine.admission.prepared import Caller as Peer
    from berth.daemon.engine.engine import Engine


DEFAULT_UMASK = 0o077  # a job whose client did not say (the CLI always does): private files
YIELD_EVERY = 256  # jobs of a batch checked between two turns of the loop


def submit(
    engine: Engine, peer: Peer, raw: Any, dry: bool = False
) -> asyncio.Future[dict[str, Any]] | Awaitable[dict[str, Any]]:
    """One job (or one array), answered once it is durable: a future (no task for it) unless
    it must first look for a twin (``--unique``, `berth watch`'s ``once``). ``dry``: a dry
    run (every check, then what it would queue; nothing kept)."""
    held = engine.jobs.count_of(peer.uid)  # (kept by the engine: not a walk of the queue)
    if dry:
        return _dry(engine, peer, raw, held)
    p, own = _check(engine, peer, raw)
    if _looks_for_twin(p.spec):
        return _submit_once(engine, peer, p, own, held)
    _finish(engine, peer, p, own, 0, held, engine.jobs.projects())
    reply, futures = insert(engine, peer, p)
    return _when_all(engine.loop, futures, reply)


def _when_all(
    loop: asyncio.AbstractEventLoop, futures: list[asyncio.Future[None]], reply: dict[str, Any]
) -> asyncio.Future[dict[str, Any]]:
    """``reply`` once every one of ``futures`` is done (the first failure instead)."""
    out: asyncio.Future[dict[str, Any]] = loop.create_future()
    left = len(futures)

    def one(f: asyncio.Future[None]) -> None:
        nonlocal left
        if out.done():
            return
        if f.cancelled():
            out.cancel()
        elif f.exception() is not None:
            out.set_exception(f.exception())  # type: ignore[arg-type]
        else:
            left -= 1
            if not left:
                out.set_result(reply)

    if not futures:
        out.set_result(reply)
    for f in futures:
        f.add_done_callback(one)
    return out


async def _submit_once(
    engine: Engine, peer: Peer, p: Prepared, own: dict[str, Any], held: int
) -> dict[str, Any]:
    await _twin(engine, p, own)
    _finish(engine, peer, p, own, 0, held, engine.jobs.projects())
    if p.dup is not None:
        return p.dup
    reply, futures = insert(engine, peer, p)
    await asyncio.gather(*futures)  # durable before we answer
    return reply


async def _dry(engine: Engine, peer: Peer, raw: Any, held: int) -> dict[str, Any]:
    """``submit``'s dry run: every check, then what it would queue; nothing kept."""
    p = await prepare(engine, peer, raw, 0, held, dry=True)
    return dryrun.reply(engine, peer, p, engine.next_id)


async def submit_all(
    engine: Engine, peer: Peer, raws: list[Any], env: Any = None, dry: bool = False
) -> list[dict[str, Any]]:
    """Several jobs (a jobs file), all or none: each is checked before any is queued, and
    they are queued in one commit. A refusal names the job by its place (``job 3 of 5``).
    ``env``: the environment of each job that names none (sent once, not per job)."""
    most = engine.accounts.max_request_jobs
    if not raws or len(raws) > most:
        raise ProtocolError(
            protocol.BAD_REQUEST,
            f"jobs: from 1 to {most} jobs ([limits] max_request_jobs), not {len(raws)}",
        )
    return await _accept(engine, peer, raws, dry, env)


async def _accept(
    engine: Engine, peer: Peer, raws: list[Any], dry: bool = False, env: Any = None
) -> list[dict[str, Any]]:
    prepared: list[Prepared] = []
    keys: dict[str, int] = {}  # identities (--unique, once) met in this batch -> its place
    queued = 0  # jobs this batch adds before this one (the user's max_jobs)
    adds = 0  # bytes this batch adds to the store before this one (max_user_bytes)
    held = engine.jobs.count_of(peer.uid)  # (kept by the engine: not a walk of the queue)
    projects = engine.jobs.projects()  # each project's jobs (kept by the engine's table)
    for k, raw in enumerate(raws):
        if k and not k % YIELD_EVERY:
            await asyncio.sleep(0)  # others' requests and passes go on meanwhile
        try:
            p = await prepare(engine, peer, raw, queued, held, projects, adds, dry, env)
        except ProtocolError as e:
            if len(raws) == 1:
                raise
            raise ProtocolError(e.code, f"job {k + 1} of {len(raws)}: {e.message}") from None
        for key in _batch_keys(p):
            if p.dup is None and key in keys:  # the same job twice in one file: the first
                p.dup = {"twin_of": keys[key]}
            keys.setdefault(key, k)
        if p.dup is None:
            queued += p.count
            adds += p.stored
        prepared.append(p)
    if len(raws) > YIELD_EVERY and queued:  # (it yielded: the user's other requests went on)
        engine.accounts.check_count(peer.user, engine.jobs.count_of(peer.uid), queued)
        engine.accounts.check_bytes(peer.user, engine.jobs.bytes_of(peer.uid), adds)
    if dry:
        return dryrun.replies(engine, peer, prepared)
    # Everything is checked: insert all of it in this turn of the loop (one commit, whose
    # one future, the last job's, answers for all); each job's checked spec let go as it goes.
    # The request's jobs share one submit time (and so one `submitted` history, as an
    # array's tasks do) and one action forgetting their identities once durable.
    now = engine.clock.time()
    noted = unique.Noted(engine)
    replies: list[dict[str, Any]] = []
    futures: list[asyncio.Future[None]] = []
    last = max((k for k, p in enumerate(prepared) if p.dup is None), default=-1)
    prepared.reverse()
    for k in range(len(prepared)):
        p = prepared.pop()
        if p.dup is None:
            reply, futures = insert(engine, peer, p, k == last, now, noted)
            replies.append(reply)
        elif "twin_of" in p.dup:
            first = replies[p.dup["twin_of"]]
            replies.append({**first, "duplicate": True, "state": "PENDING"})
        else:
            replies.append(p.dup)
    noted.until_durable()
    await asyncio.gather(*futures)  # durable before we answer
    return replies


def _batch_keys(p: Prepared) -> list[str]:
    """What makes two jobs of one request the same: a `berth watch` line's key; with
    ``--unique``, the job's identity."""
    out = [p.spec.unique_key] if p.spec.once is not None and p.spec.unique_key else []
    return out + ([p.ident] if p.spec.unique else [])


async def prepare(
    engine: Engine, peer: Peer, raw: Any, queued: int = 0, held: int = 0,
    projects: dict[str, int] | None = None, adds: int = 0, dry: bool = False, env: Any = None,
) -> Prepared:  # fmt: skip
    """A job checked for submission (``queued``: the jobs its request adds before it; ``held``:
    the user's unfinished jobs; ``projects``: each project's unfinished jobs, the engine's
    count if not given; ``adds``: the bytes its request adds to the store before it; ``dry``:
    a dry run's, which makes no directory; ``env``: its environment if it names none)."""
    p, own = _check(engine, peer, raw, queued, adds, env)
    if _looks_for_twin(p.spec):
        await _twin(engine, p, own)
    _finish(engine, peer, p, own, queued, held,
            projects if projects is not None else engine.jobs.projects(), dry)  # fmt: skip
    return p


def _check(
    engine: Engine, peer: Peer, raw: Any, queued: int = 0, adds: int = 0, env: Any = None
) -> tuple[Prepared, dict[str, Any]]:
    """The checks of one job before its twin is looked for: (the job, what the daemon adds
    to its spec so far). ``env``: the request's, for a job that names none."""
    if env is not None and type(raw) is dict and "env" not in raw:
        raw = {**raw, "env": env}  # (a line's copy while it is checked: not all kept at once)
    if type(raw) is dict and type(raw.get("env")) is dict:  # (the request's own dict)
        raw["env"] = same_env(peer.uid, raw["env"])  # (one copy in memory: equal ones)
    spec = JobSpec.from_dict(raw)  # every field, strictly; nothing is stored otherwise
    kept(peer.uid, spec.env)  # (checked: the user's next equal environment is this one)
    me = os.geteuid()
    if me != 0 and peer.uid != me:
        owner = user_name(me)
        raise ProtocolError(
            protocol.NOT_OWNER,
            f"this berth daemon runs as {owner} and runs jobs only as {owner}; {peer.user}, "
            "submit to the system daemon (unset BERTH_SOCKET) or start your own with "
            "`berth daemon`",
        )
    why = one_machine(spec.nodes, spec.ntasks_per_node)
    if why is not None:
        raise ProtocolError(protocol.BAD_REQUEST, f"{why}; nothing was queued")
    p = Prepared(spec)
    engine.accounts.check_request(env_bytes(spec), p.count, queued + p.count)
    size, p.stored = sizes(spec, p.count)  # (one encoding of the spec for both)
    check_job_bytes(size, engine.accounts.max_job_bytes)  # (every field)
    engine.accounts.check_bytes(peer.user, engine.jobs.bytes_of(peer.uid), adds + p.stored)
    for i in (spec.gpu_ids or ()) + spec.prefer:
        if engine.res.inventory and i not in engine.res.by_index:
            known = ", ".join(str(g) for g in sorted(engine.res.by_index)) or "none"
            raise ProtocolError(protocol.NO_SUCH_GPU, f"no GPU {i!r} here (GPUs: {known})")
    own: dict[str, Any] = {"array": None, "array_argvs": None}
    if spec.dependency is not None:  # (@ made the caller's last job; arrays their tasks)
        p.deps, p.any_of, own["dependency"] = depends.resolve(engine, peer, spec.dependency)
    sized = learned.size(engine, peer.uid, p, engine.res.inventory)  # (no -g, no --mem)
    each = fitness.memory_share(engine.res.inventory, sized) if sized.by_memory else 1.0
    p.request = Request(
        gpus=sized.gpus,
        mem=sized.mem,
        gpu_ids=spec.gpu_ids,
        prefer=spec.prefer,
        name=spec.name_filter,
        each=each,  # (of one GPU: Request makes it the share gpus=each)
        cpu=CPU_SLOT if spec.gpus == 0 else None,  # (-g 0: one CPU slot, engine.cpu_nodes)
    )
    fitness.check_fits(engine.res.inventory, p.request)
    p.requeue = fitness.requeue(spec, engine.opts)
    if not p.requeue[0]:  # (requeued at the daemon's limit, a longer -t is switched, not refused)
        fitness.check_limit(spec.time_limit, engine.opts.max_job_time)
    # What the daemon adds to the spec it stores (above: the dependency, resolved)
    if spec.umask is None:
        own["umask"] = DEFAULT_UMASK
    _identities(peer, spec, p, own)
    return p, own


def _finish(
    engine: Engine, peer: Peer, p: Prepared, own: dict[str, Any], queued: int, held: int,
    projects: dict[str, int], dry: bool = False,
) -> None:  # fmt: skip
    """The checks of one job once its twin was looked for: the user's and its project's
    limits, and its logs (``dry``: their directory checked, not made)."""
    spec = p.spec
    if p.dup is None:  # the user's limits (berth admin limits): max_jobs, max_time, max_gpus
        limit = engine.accounts.check_submit(
            peer.user, p.request, spec.time_limit, held, queued + p.count
        )
        if limit is not None:
            own["time_limit"] = limit
        own["project"] = engine.accounts.projects.check(peer.user, spec.project, projects, p.count)
    out, err = spec.stdout, spec.stderr
    me = os.geteuid()
    if out is None or (spec.pty and me == 0):
        log_dir = user_log_dir(engine.opts.state_dir, peer, make=not dry)
        out = out or os.path.join(log_dir, "%A_%a.out" if p.array else "%j.out")
        if me == 0:  # a --pty job's terminal: in a directory the job's user may write
            own["pty_dir"] = log_dir
    p.out, p.err = out, err or out  # as sbatch: one file for both unless -e
    p.spec = spec.replace(**own)


def insert(
    engine: Engine, peer: Peer, p: Prepared, durable: bool = True, now: float | None = None,
    noted: unique.Noted | None = None,
) -> tuple[dict[str, Any], list[asyncio.Future[None]]]:  # fmt: skip
    """Queue a prepared job (or all the tasks of its array): (reply, the future of its
    durability: one, its last job's, or none if not ``durable``: a request's jobs go in one
    commit, and its last insert's future answers for all). An array's tasks share one
    :class:`~berth.daemon.store.tasks.Tasks`: no spec a task until the commit writes it.
    ``now``: its submit time (its request's; the clock's if not given); ``noted``: where its
    identity is kept until durable (its request's; its own if not given)."""
    spec = p.spec
    now = engine.clock.time() if now is None else now
    order, throttle = arrays.indices(p.array) if p.array else ([0], None)
    base = engine.new_ids(len(order))
    own = made.own_fields(p, peer.user, base, order)
    tasks = Tasks(spec, own) if p.array else None
    fut: asyncio.Future[None] | None = None
    single: JobSpec | None = None
    for k, extra in enumerate(made.extras(p, base, order)):
        job = Job(
            id=base + k,
            submit_time=now,
            request=p.request,  # (the table shares equal ones: JobTable)
            name=made.name_of(spec),
            user=peer.user,
            uid=peer.uid,
            gid=peer.gid,
            priority=spec.priority,
            project=spec.project or "",
            time_limit=spec.time_limit,
            dependencies=p.deps,
            dependency_any=p.any_of,
            retries=spec.retries,
            requeue=p.requeue[0],
            max_requeues=p.requeue[1],
            held=spec.hold,
            not_before=spec.begin if spec.begin and spec.begin > now else None,
            extra=extra,
            group=arrays.group(base) if throttle else "",
            group_limit=throttle or 0,
        )
        # (the store keeps the spec's to_dict(); an array task's made as its row is)
        single = None if tasks else spec.replace(**own(job.id))
        fut = engine.insert(job, tasks or single or spec, durable and k == len(order) - 1) or fut
    if spec.unique_key is not None:  # (in memory until durable: the store's index then)
        if noted is None:
            unique.note_until_durable(engine, spec.unique_key, base)
        else:
            noted.add(spec.unique_key, base)
    if p.ident != spec.unique_key:  # (a `berth watch` line: its job identity too, in memory)
        engine.note_unique(p.ident, base)
    return made.reply(engine, p, peer.user, base, order, single), [fut] if fut else []


def _identities(peer: Peer, spec: JobSpec, p: Prepared, own: dict[str, Any]) -> None:
    """Every job keeps its identity (:func:`unique.key`) as its ``unique_key``, so that
    ``--unique`` finds a twin submitted without it; a line of `berth watch` keeps its
    ``once`` key there instead (the line's own identity), its job identity in memory."""
    p.ident = unique.key(peer.uid, spec)
    own["unique_key"] = p.ident
    if spec.once is not None:
        own["unique_key"] = _once_key(peer.uid, spec.once)


def _looks_for_twin(spec: JobSpec) -> bool:
    return spec.once is not None or spec.unique


async def _twin(engine: Engine, p: Prepared, own: dict[str, Any]) -> None:
    """With ``once``, a line already queued answers its job; with ``unique``, a live or
    completed twin answers for it (both may apply: `berth watch --unique`)."""
    spec = p.spec
    if spec.once is not None:
        p.dup = await _once(engine, own["unique_key"])  # (the line's key: _identities)
    if p.dup is None and spec.unique:
        p.dup = await unique.twin(engine, p.ident)


def _once_key(uid: int, once: str) -> str:
    """The identity of `berth watch`'s line ``once`` of this user (kept as ``unique_key``)."""
    return hashlib.sha256(f"once:{uid}:{once}".encode()).hexdigest()[:32]


async def _once(engine: Engine, k: str) -> dict[str, Any] | None:
    """The reply for a job whose ``once`` key ``k`` another job of this user has (in any
    state), or None."""
    found = unique.newest(engine, k)
    if found is None:
        return None
    job_id, state = found
    await engine.durable()
    return {"job_id": job_id, "duplicate": True, "state": state}
