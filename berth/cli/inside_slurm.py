"""``berth daemon --inside-slurm``: a berth queue inside one Slurm allocation.

Slurm hands the allocation whole GPUs; berth packs many small and fractional jobs onto them,
so a sweep of 200 half-GPU jobs needs one allocation, not 200. The daemon manages exactly the
allocation's GPUs: those ``CUDA_VISIBLE_DEVICES`` names (Slurm sets it, in the numbering the
allocation's processes see), else ``SLURM_JOB_GPUS`` (the node's indices). Its socket and
state live in a node-local directory of the allocation (:func:`berth.wire.paths.
allocation_dir`), where every `berth` command run inside the allocation finds it, so two
allocations on one node, or on nodes sharing a home directory, never meet.

    salloc --gres=gpu:4 -t 8:00:00
    berth daemon --inside-slurm --exit-with $$
    berth submit --file sweep.txt -g 0.5

One daemon places on one node: in an allocation of several nodes (``-N 2``) it uses the GPUs
of the node it runs on, and says so when it starts (:func:`one_node_of`), naming the nodes
left idle and what to do.
"""

from __future__ import annotations

import os
import re
import sys

from berth.devices import read_gpus
from berth.devices.visible import restrict_to_visible
from berth.errors import UsageError
from berth.wire.paths import allocation_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping, Sequence

    from berth.config import Config
    from berth.devices.model import GpuSnapshot


def allocation_gpus(gpus: Sequence[GpuSnapshot], environ: Mapping[str, str]) -> list[GpuSnapshot]:
    """The GPUs of the allocation among ``gpus`` (all GPUs NVML shows on this node)."""
    job = environ.get("SLURM_JOB_ID")
    if not job:
        raise UsageError(
            "--inside-slurm: not inside a Slurm allocation (no SLURM_JOB_ID); run it in an "
            "salloc shell, an sbatch script or an srun step"
        )
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip():
        mine = restrict_to_visible(gpus, visible)
        if not mine:
            raise UsageError(
                f"--inside-slurm: CUDA_VISIBLE_DEVICES={visible!r} names none of this node's "
                f"{len(gpus)} GPU(s)"
            )
        return mine
    listed = environ.get("SLURM_JOB_GPUS") or environ.get("SLURM_STEP_GPUS") or ""
    if not listed.strip():  # salloc's shell is in no step: the controller knows the GPUs
        listed = controller_gpus(job, environ)
    by_index = {g.index: g for g in gpus}
    out = []
    for item in listed.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) not in by_index:
            raise UsageError(
                f"--inside-slurm: SLURM_JOB_GPUS={listed!r} names GPU {item!r}, which this node "
                f"does not have (GPUs {', '.join(str(i) for i in sorted(by_index))})"
            )
        out.append(by_index[int(item)])
    return out


def controller_gpus(job: str, environ: Mapping[str, str]) -> str:
    """The GPU indices Slurm gave job ``job`` on this node (``scontrol -d show job``'s
    ``GRES=gpu:2(IDX:0-1)``), as ``0,1``: what a shell that salloc runs, in no step, has no
    variable for. Refused on a node that is not the allocation's (salloc's shell on a login
    node)."""
    import socket  # rare: salloc
    import subprocess  # heavy (~2 ms): salloc only

    try:
        done = subprocess.run(["scontrol", "-d", "-o", "show", "job", job], capture_output=True,
                              text=True, timeout=60, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UsageError(f"--inside-slurm: cannot ask Slurm for job {job}'s GPUs: {e}") from None
    here = {environ.get("SLURMD_NODENAME") or "", socket.gethostname().split(".")[0], "localhost"}
    nodes = re.findall(r"\bNodes=(\S+) CPU_IDs=\S+ Mem=\S+ GRES=(\S*)", done.stdout)
    for node, gres in nodes:
        if node in here:
            idx = re.search(r"gpu(?::[^:(,]+)?:\d+\(IDX:([0-9,-]+)\)", gres)
            if idx is None:
                break
            return ",".join(_expand(idx.group(1)))
    else:
        if nodes:
            names = ", ".join(n for n, _ in nodes)
            raise UsageError(
                f"--inside-slurm: this is not a node of Slurm job {job} ({names}): run it there, "
                "in a step: salloc --gres=gpu:4 srun --overlap --pty bash, then berth daemon "
                "--inside-slurm --exit-with $$"
            )
    raise UsageError(
        f"--inside-slurm: Slurm job {job} has no GPUs (neither CUDA_VISIBLE_DEVICES nor "
        "SLURM_JOB_GPUS is set, and Slurm names none); allocate some, e.g. salloc --gres=gpu:4"
    )


def _expand(ranges: str) -> list[str]:
    """``0-1,3`` -> ``["0", "1", "3"]``."""
    out = []
    for part in ranges.split(","):
        lo, _, hi = part.partition("-")
        out += [str(i) for i in range(int(lo), int(hi or lo) + 1)]
    return out


def one_node_of(environ: Mapping[str, str], gpus: int) -> str | None:
    """What a daemon in an allocation of several nodes says when it starts (None for one
    node): it uses only this node's ``gpus`` GPUs."""
    n = environ.get("SLURM_JOB_NUM_NODES") or environ.get("SLURM_NNODES") or "1"
    if not n.isdigit() or int(n) < 2:
        return None
    nodes = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST") or "?"
    here = environ.get("SLURMD_NODENAME") or "this node"
    return (
        f"berth daemon --inside-slurm: this allocation has {n} nodes ({nodes}); this daemon "
        f"places jobs on {here} only, on its {gpus} GPU(s): the other nodes' GPUs stay "
        "unused. Allocate one node (-N 1) for berth's queue (docs/slurm.md)"
    )


def apply(args: argparse.Namespace, cfg: Config) -> list[str]:
    """Restrict the daemon to the allocation's GPUs (``cfg``'s inventory) and give it the
    allocation's socket and state dir unless named. Returns the UUIDs of its GPUs."""
    mine = allocation_gpus(read_gpus(cfg, process_details=False), os.environ)
    uuids = [g.uuid for g in mine]
    several = one_node_of(os.environ, len(mine))
    if several is not None:
        sys.stderr.write(several + "\n")
    inv = cfg.inventory
    if inv.manage is not None:  # the config may narrow it further, never widen it
        keep = set(inv.manage)
        uuids = [g.uuid for g in mine if g.uuid in keep or str(g.index) in keep]
        if not uuids:
            raise UsageError(
                "--inside-slurm: [inventory] manage in the config leaves none of the "
                "allocation's GPUs"
            )
    inv.manage = tuple(uuids)
    alloc = allocation_dir()
    assert alloc is not None  # SLURM_JOB_ID is set: allocation_gpus checked
    # The allocation's own, even when $BERTH_SOCKET / $BERTH_STATE_DIR name a daemon outside
    # it (where berth commands run in the allocation would otherwise send its jobs).
    args.socket = args.socket or os.path.join(alloc, "daemon.sock")
    args.state_dir = args.state_dir or os.path.join(alloc, "state")
    os.makedirs(alloc, mode=0o700, exist_ok=True)
    for d in (os.path.dirname(alloc), alloc):  # in a shared /tmp: ours, and only ours
        st = os.lstat(d)
        if st.st_uid != os.getuid() or st.st_mode & 0o022 or not os.path.isdir(d):
            raise UsageError(
                f"--inside-slurm: {d} is not a private directory of yours (owner uid "
                f"{st.st_uid}, mode {st.st_mode & 0o777:o}); remove it, or set TMPDIR"
            )
    prune(os.path.dirname(alloc), os.path.basename(alloc))
    return uuids


def prune(base: str, mine: str) -> list[str]:
    """Remove the directories ``slurm-JOBID`` in ``base`` (this user's) of allocations that
    Slurm no longer runs (one squeue for all; nothing is removed when it does not answer):
    what an ended allocation left, its state and its jobs' default logs. Returns them."""
    import shutil  # rare: --inside-slurm
    import subprocess  # heavy (~2 ms): --inside-slurm only

    old = {n.removeprefix("slurm-"): n for n in os.listdir(base)
           if n != mine and n.startswith("slurm-") and n[6:].isdigit()}  # fmt: skip
    if not old:
        return []
    try:
        done = subprocess.run(["squeue", "-h", "-o", "%A", "-j", ",".join(old)],
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0 and "Invalid job id" not in done.stderr:
        return []
    live = set(done.stdout.split())
    gone = [os.path.join(base, n) for job, n in old.items() if job not in live]
    for path in gone:
        shutil.rmtree(path, ignore_errors=True)
    return gone
