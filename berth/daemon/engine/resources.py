"""What the daemon schedules onto: the GPUs (NVML snapshots, refreshed every poll interval),
and what holders other than its own jobs use on them (claims of daemonless ``berth run`` /
``acquire()`` users, and GPU processes outside berth).

A snapshot is up to a poll interval old, and scheduling passes run between polls (a job that
ends starts the next at once), so each pass reads the processes a snapshot lists against what
is true *now*:

- A listed process that lived at the read and has ended since (gone, a zombie, or its pid
  taken by a process that started later) holds nothing: an ended job's process, still in
  the snapshot, never keeps its freed GPU idle until the next poll.
- A living process is ours if it descends from one of our jobs: its session is a job's (every
  job runs in its own session, whose id is the job leader's pid), or its ancestry reaches a
  job leader or the supervisor running the job. Supervisors are child subreapers, so a
  job's process that left its session (``setsid``) or its parent (a daemon's double fork)
  is still theirs. A process descending from the holder of a daemonless claim is that
  claim's (counted by the claim). Either is so only on the GPUs its job or claim holds: on
  any other GPU (a job that set ``CUDA_VISIBLE_DEVICES`` itself) it is outside use, or that
  GPU would look free and go to a second job beside it. Any other living process is outside
  berth: its GPU is busy.
- A listed pid that did not exist at the read may be one we cannot see (NVML reports pids
  of other PID namespaces, e.g. from a container): it stays outside until the next read.

NVML is not re-read when a job ends: the snapshot is right about everything it lists, and a
process that appeared since the last read is missed at any moment between polls, not only
then; a read per ended job would put the driver's latency into every dispatch.
"""

from __future__ import annotations

import os

from berth.claims.ownfiles import of_our_jobs
from berth.core.inventory import Gpu, Usage
from berth.daemon.engine.gpu_health import GpuHealth
from berth.devices import read_gpus
from berth.errors import BerthError
from berth.selection.outside import OutsideRule, unavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping

    from berth.claims.ledger import Ledger
    from berth.claims.ledger import LedgerScan as LedgerState
    from berth.config import Config
    from berth.devices.model import GpuSnapshot

    #: A listed process: True, outside berth (every GPU); False, ended (none); else the GPUs
    #: of the job or claim it belongs to (outside use on any other).
    Whose = bool | Collection[int]

UNREADABLE = -1  # a living process whose /proc entry we may not read (start time unknown)


class Resources:
    def __init__(self, cfg: Config, ledger: Ledger) -> None:
        self.cfg = cfg
        self.ledger = ledger
        self.snapshots: list[GpuSnapshot] = []
        self.inventory: list[Gpu] = []
        self.by_index: dict[int, GpuSnapshot] = {}
        self.by_uuid: dict[str, GpuSnapshot] = {}
        self.error: str | None = None
        # pid listed by the last read -> its start time (clock ticks since boot) right after
        # the read, or UNREADABLE; pids that did not exist then are absent.
        self.seen: dict[int, int] = {}
        self.health = GpuHealth()  # (its audit log: set by the daemon's start)

    def poll(self) -> None:
        """Read the GPUs (a blocking NVML read, fast)."""
        try:
            snaps = read_gpus(self.cfg, process_details=False)
        except BerthError as e:
            self.error = str(e)
            return
        self.error = None
        self.health.seen(snaps)  # (a GPU lost or back: logged, and in `berth admin log`)
        banned = self.cfg.inventory
        snaps = [s for s in snaps if banned.is_banned(s.index, s.uuid, s.name) is None]
        self.snapshots = snaps
        self.by_index = {s.index: s for s in snaps}
        self.by_uuid = {s.uuid: s for s in snaps}
        self.inventory = [Gpu(s.index, s.uuid, s.name, s.memory_total, s.healthy) for s in snaps]
        seen: dict[int, int] = {}
        for s in snaps:
            for p in s.processes or ():
                if p.pid not in seen and (start := _start_time(p.pid)) is not None:
                    seen[p.pid] = start
        self.seen = seen

    def _outside_use(self, s: GpuSnapshot, count: int, used: int) -> str | None:
        """Why ``count`` processes outside berth, using ``used`` bytes of GPU ``s``, make it
        busy (a pending reason's words), or None when the admin's rule lets berth use it: the
        one rule ``berth select`` applies too (:func:`berth.selection.outside.unavailable`)."""
        return unavailable(OutsideRule.of(self.cfg), count, used, s.memory_total, s.utilization)

    def bodies_needed(self) -> bool:
        """Whether a ledger scan must read the claims' bodies: only their holders' pids are
        used, to tell our claimants' GPU processes from others', and only when some GPU
        shows processes (the names of claim files carry the GPU, share and memory)."""
        return any(s.processes for s in self.snapshots)

    def resolve(self, ident: str) -> GpuSnapshot | None:
        """A GPU named by index, full UUID or UUID prefix."""
        ident = ident.strip()
        if ident.isdigit():
            return self.by_index.get(int(ident))
        matches = [s for s in self.snapshots if s.uuid.startswith(ident)]
        return matches[0] if len(matches) == 1 else None

    def others(
        self,
        state: LedgerState,
        own_lease_ids: Collection[str],
        own_pids: Callable[[], Mapping[int, Collection[int]]],
    ) -> dict[int, Usage]:
        """GPU index -> what holders other than our jobs use there. ``own_pids`` (the pids
        of our jobs' leaders and of the supervisors running them, each with the GPUs its job
        was given) is asked only if some GPU lists a process that still lives."""
        share: dict[int, float] = {}
        mem: dict[int, int] = {}
        labels: dict[int, list[str]] = {}
        holder_pids: dict[int, set[int]] = {}  # a claim's holder -> the GPUs it claims
        me = os.geteuid()
        for c in state.claims:
            s = self.by_uuid.get(c.uuid)
            if s is None or of_our_jobs(c, own_lease_ids, me):
                continue  # (a file of another's named with our job's lease: theirs)
            share[s.index] = share.get(s.index, 0.0) + c.share
            mem[s.index] = mem.get(s.index, 0) + c.memory
            labels.setdefault(s.index, []).append(f"claim by {c.user or c.uid}")
            for pid in c.pids:
                holder_pids.setdefault(pid, set()).add(s.index)
        for w in state.waiters:
            for uuid, w_share, w_mem in w.reserve:
                s = self.by_uuid.get(uuid)
                if s is None:
                    continue
                share[s.index] = share.get(s.index, 0.0) + w_share
                mem[s.index] = mem.get(s.index, 0) + w_mem
                labels.setdefault(s.index, []).append("reserved by a waiting `berth run`")
        claimed_mem = dict(mem)  # (declared by claims and waiters, before outside use)

        def share_mem(index: int) -> int:
            return claimed_mem.get(index, 0)

        busy: set[int] = set()
        verdicts: dict[int, Whose] = {}  # pid -> whose (a process may use several GPUs)
        berths: list[dict[int, Collection[int]]] = []  # our jobs' and holders', once asked

        def ours() -> dict[int, Collection[int]]:
            if not berths:  # (a job's leader may hold claims of its own too: both count)
                every: dict[int, Collection[int]] = dict(own_pids())
                for pid, gpus in holder_pids.items():
                    every[pid] = {*every.get(pid, ()), *gpus}
                berths.append(every)
            return berths[0]

        for s in self.snapshots:
            outside = 0
            for p in s.processes or ():
                verdict = verdicts.get(p.pid)
                if verdict is None:
                    if p.pid in holder_pids:  # a holder: its claims' GPUs (and its job's)
                        verdict = ours()[p.pid]
                    else:
                        verdict = self._whose(p.pid, ours, bool(holder_pids))
                    verdicts[p.pid] = verdict
                if verdict is True or (verdict is not False and s.index not in verdict):
                    outside += 1
                    mem[s.index] = mem.get(s.index, 0) + (p.used_memory or 0)
            if outside:
                said = self._outside_use(s, outside, mem.get(s.index, 0) - share_mem(s.index))
                if said is not None:
                    busy.add(s.index)
                    labels.setdefault(s.index, []).append(said)
        out: dict[int, Usage] = {}
        for index in set(share) | set(mem) | busy:
            out[index] = Usage(
                min(1.0, share.get(index, 0.0)),
                mem.get(index, 0),
                index in busy,
                "; ".join(labels.get(index, [])),
            )
        return out

    def _whose(
        self, pid: int, berths: Callable[[], Mapping[int, Collection[int]]], claims: bool
    ) -> Whose:
        """The process the last read listed as ``pid``: True if it lives and is not
        berth's (outside use on every GPU), False if it ended (it holds nothing), else the
        GPUs of the job or claim it belongs to (outside use on any other). ``claims``:
        daemonless claims are held, so a job's process may also be a claim holder's (a
        script in a job that claims more GPUs): its ancestry is walked too."""
        then = self.seen.get(pid)
        if then is None:
            return True  # not there at the read, or not visible to us: keep it counted
        stat = _stat(pid)
        if stat is None:
            return _alive(pid)  # gone: it holds nothing; unreadable: someone's, alive
        state, _ppid, sid, start = stat
        if state in b"ZX" or (then != UNREADABLE and start != then):
            return False  # ended (a zombie holds no GPU), or its pid is another's now
        ours = berths()
        gpus = ours.get(sid)
        if gpus is None or claims:
            nearer = _ancestor(stat, ours)
            if nearer is not None:
                gpus = nearer if gpus is None else {*gpus, *nearer}
        return True if gpus is None else gpus


def _stat(pid: int) -> tuple[bytes, int, int, int] | None:
    """(state, ppid, session, start time in clock ticks) of a process, None if it is gone
    or we may not read it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2 :].split()
        return fields[0], int(fields[1]), int(fields[3]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _start_time(pid: int) -> int | None:
    """The start time of a living process, UNREADABLE if it lives but /proc hides it, None
    if it does not exist."""
    stat = _stat(pid)
    if stat is not None:
        return stat[3]
    return UNREADABLE if _alive(pid) else None


def _ancestor(
    stat: tuple[bytes, int, int, int], ancestors: Mapping[int, Collection[int]]
) -> Collection[int] | None:
    """What ``ancestors`` holds for the nearest ancestor of the process with this stat, or
    None if it has none there. (A job's orphans are its supervisor's children: the
    supervisor is a child subreaper.)"""
    ppid = stat[1]
    for _ in range(64):
        if ppid in ancestors:
            return ancestors[ppid]
        if ppid <= 1:
            return None
        parent = _stat(ppid)
        if parent is None:
            return None
        ppid = parent[1]
    return None
