"""What the daemon schedules onto: the GPUs (NVML snapshots, refreshed every poll interval),
and what holders other than its own jobs use on them (claims of daemonless ``berth run`` /
``acquire()`` users, and GPU processes outside berth).

A process belongs to one of our jobs if its session id is a job's (every job runs in its own
session, whose id is the job leader's pid).
"""

from __future__ import annotations

import os

from berth.core.inventory import Gpu, Usage

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    from berth.claims.ledger import Ledger
    from berth.claims.ledger import State as LedgerState
    from berth.config import Config
    from berth.devices.model import GpuSnapshot


class Resources:
    def __init__(self, cfg: Config, ledger: Ledger) -> None:
        self.cfg = cfg
        self.ledger = ledger
        self.snapshots: list[GpuSnapshot] = []
        self.inventory: list[Gpu] = []
        self.by_index: dict[int, GpuSnapshot] = {}
        self.by_uuid: dict[str, GpuSnapshot] = {}
        self.error: str | None = None

    def poll(self) -> None:
        """Read the GPUs (a blocking NVML read, fast)."""
        from berth.devices import read_gpus
        from berth.errors import BerthError

        try:
            snaps = read_gpus(self.cfg, process_details=False)
        except BerthError as e:
            self.error = str(e)
            return
        self.error = None
        banned = self.cfg.inventory
        snaps = [s for s in snaps if banned.is_banned(s.index, s.uuid, s.name) is None]
        self.snapshots = snaps
        self.by_index = {s.index: s for s in snaps}
        self.by_uuid = {s.uuid: s for s in snaps}
        self.inventory = [Gpu(s.index, s.uuid, s.name, s.memory_total, s.healthy) for s in snaps]

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
        own_leases: Collection[str],
        own_sids: Callable[[], Collection[int]],
    ) -> dict[int, Usage]:
        """GPU index -> what holders other than our jobs use there. ``own_sids`` (the session
        ids of our jobs) is asked only if some GPU shows processes."""
        share: dict[int, float] = {}
        mem: dict[int, int] = {}
        labels: dict[int, list[str]] = {}
        holder_pids: set[int] = set()
        for c in state.claims:
            s = self.by_uuid.get(c.uuid)
            if s is None or c.lease in own_leases:
                continue
            share[s.index] = share.get(s.index, 0.0) + c.share
            mem[s.index] = mem.get(s.index, 0) + c.memory
            labels.setdefault(s.index, []).append(f"claim by {c.user or c.uid}")
            holder_pids.update(c.pids)
        for w in state.waiters:
            for uuid, w_share, w_mem in w.reserve:
                s = self.by_uuid.get(uuid)
                if s is None:
                    continue
                share[s.index] = share.get(s.index, 0.0) + w_share
                mem[s.index] = mem.get(s.index, 0) + w_mem
                labels.setdefault(s.index, []).append("reserved by a waiting `berth run`")
        busy: set[int] = set()
        sids: Collection[int] | None = None
        for s in self.snapshots:
            if s.processes and sids is None:
                sids = own_sids()
            outside = 0
            for p in s.processes or ():
                if p.pid in holder_pids or _session(p.pid) in (sids or ()):
                    continue
                outside += 1
                mem[s.index] = mem.get(s.index, 0) + (p.used_memory or 0)
            if outside:
                busy.add(s.index)
                labels.setdefault(s.index, []).append(f"{outside} process(es) outside berth")
        out: dict[int, Usage] = {}
        for index in set(share) | set(mem) | busy:
            out[index] = Usage(
                min(1.0, share.get(index, 0.0)),
                mem.get(index, 0),
                index in busy,
                "; ".join(labels.get(index, [])),
            )
        return out


def _session(pid: int) -> int:
    try:
        return os.getsid(pid)
    except OSError:
        return -1
