"""A real Slurm (slurmctld + slurmd from Debian's packages) in a temporary directory, one
node with 4 fake GPUs, for the Slurm backend's tests; ``SlurmRig(nodes=2)``: two nodes (n1,
n2) of 4 fake GPUs each, for jobs across nodes.

What these machines taught us (Slurm 22.05):

- ``AuthType=auth/none`` and ``CredType=cred/none``: no munge needed.
- gres ``File=`` must name character devices (``mknod DIR/nvidiaN c 1 3``): with plain files
  slurmd does not set CUDA_VISIBLE_DEVICES.
- ``CPUs=2`` and ``OverSubscribe=FORCE:8`` on the partition, else only 2 jobs run at once.
- Shards need ``File=`` naming their GPU's device, one gres.conf line per GPU: without it
  Slurm hands a GPU's shards out while the GPU itself runs a whole-GPU job.
- The host name may not resolve: slurmd runs with ``-N localhost``.
- Two nodes on this one host: ``NodeName=n1 NodeHostname=localhost Port=P1`` (a port each),
  ``slurmd -N n1`` and ``-N n2``, each with its own spool dir, pid and log file (``%n`` in
  SlurmdSpoolDir...: the node's name) and its own device files in gres.conf. Debian's slurmd
  needs nothing more (no --enable-multiple-slurmd build).
- ``SchedulerParameters=batch_sched_delay=0,sched_min_interval=0``: jobs start at once;
  ``sched_interval=1``: a job that becomes eligible with no event to wake the scheduler (a
  requeued one, at its BeginTime) starts within a second, not at the next periodic pass
  (every 60 s, or backfill's 30 s: the requeue test took 30 s).
- ``AuthInfo=cred_expire=5``: a requeued job may start again cred_expire + 1 s after
  ``scontrol requeue`` (Slurm's default 120 s).
- Stop by cancelling the jobs and waiting for their step daemons (``slurmstepd``) to go
  before stopping slurmd: else they are orphaned.

Both daemons run in the foreground (``-D``) as children of the test process, so they are
stopped by their own pids. Every Slurm command the tests (and berth) run finds this cluster
through ``SLURM_CONF``.

``SlurmRig(cluster="other", first_job=N)``: a second cluster beside the first (its own
ClusterName), whose first job has the id ``N`` (the same id as a job of the first).

With ``accounting=True`` the cluster keeps accounting, as sacct needs: slurmdbd over a MariaDB
server (``mariadbd`` on an empty data directory with ``--skip-grant-tables``: no
mariadb-install-db, it starts in 0.1 s) on a free port of 127.0.0.1. ``forget()`` restarts
slurmctld with its state cleared, so that it no longer knows the jobs that ran.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Mapping

from helpers import wait_until

_STEP_SOCKET = re.compile(r"^[^_]+_\d+\.\d+$")  # <node>_<job>.<step>
GPUS = 4
SHARDS_PER_GPU = 2
BINARIES = ("slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
ACCOUNTING_BINARIES = ("slurmdbd", "mariadbd", "sacct", "sacctmgr")


def _which(name: str) -> str | None:
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def missing_binaries(accounting: bool = False, nodes: int = 1) -> list[str]:
    """The Slurm programs this rig needs that are not installed (srun: for jobs of several
    nodes)."""
    need = BINARIES + (ACCOUNTING_BINARIES if accounting else ()) + ("srun",) * (nodes > 1)
    return [b for b in need if _which(b) is None]


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


SLURM_CONF = """\
ClusterName={cluster}
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/none
CredType=cred/none
AuthInfo=cred_expire=5
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool{node_dir}
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd{node_suffix}.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd{node_suffix}.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu,shard
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=1
JobCompType=jobcomp/none
{accounting}
MpiDefault=none
ReturnToService=2
MinJobAge=600
KillWait=2
FirstJobId={first_job}
{node_lines}PartitionName=debug Nodes={node_list} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
"""
NODE_LINE = (
    "NodeName={name}{where} CPUs=2 RealMemory=4000 Gres=gpu:{gpus},shard:{shards} State=UNKNOWN\n"
)

GRES_LINE = "NodeName={node} Name=gpu File={dev}/nvidia[0-{last}]\n"
# Shards belong to a GPU by its device file, SHARDS_PER_GPU each.
SHARD_LINE = "NodeName={node} Name=shard Count={n} File={dev}/nvidia{i}\n"


SLURMDBD_CONF = """\
AuthType=auth/none
DbdHost=localhost
DbdPort={dbd_port}
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={db_port}
StorageUser=root
StorageLoc=slurm_acct_db
PidFile={root}/slurmdbd.pid
LogFile={root}/log/slurmdbd.log
"""


class SlurmRig:
    """One running test cluster. ``env``: the variables its commands need (SLURM_CONF)."""

    def __init__(
        self, accounting: bool = False, nodes: int = 1, cluster: str = "berthtest",
        first_job: int = 1,
    ) -> None:  # fmt: skip
        # Short: slurmstepd's socket paths (under the spool dir) are limited to 108 bytes.
        self.root = tempfile.mkdtemp(prefix="bsl-", dir="/tmp")
        os.chmod(self.root, 0o755)
        self.conf = os.path.join(self.root, "slurm.conf")
        self.env = {"SLURM_CONF": self.conf}
        self.accounting = accounting
        self.procs: dict[str, subprocess.Popen[bytes]] = {}  # in start order
        self.first_job = first_job
        self.cluster = cluster  # its ClusterName (another rig may have another)
        # One node is the host itself; more are n1, n2... (each its own slurmd on its port)
        self.nodes = ["localhost"] if nodes == 1 else [f"n{i}" for i in range(1, nodes + 1)]

    # -- start ------------------------------------------------------------------------------

    def write_config(self) -> None:
        for sub in ("state", "spool", "log"):
            os.makedirs(os.path.join(self.root, sub))
        for node in self.nodes:
            os.makedirs(self._dev(node))
            for i in range(GPUS):
                os.mknod(os.path.join(self._dev(node), f"nvidia{i}"), 0o666 | stat.S_IFCHR,
                         os.makedev(1, 3))  # fmt: skip
        ctld_port, slurmd_port, self.dbd_port, self.db_port, *node_ports = _free_ports(
            4 + len(self.nodes)
        )
        accounting = "AccountingStorageType=accounting_storage/none"
        if self.accounting:
            accounting = (
                "AccountingStorageType=accounting_storage/slurmdbd\n"
                f"AccountingStorageHost=localhost\nAccountingStoragePort={self.dbd_port}\n"
                "AccountingStorageTRES=gres/gpu,gres/shard"  # (what GPU clusters set)
            )
        self.values = {
            "root": self.root,
            "cluster": self.cluster,
            "ctld_port": ctld_port,
            "slurmd_port": slurmd_port,
            "gpus": GPUS,
            "shards": GPUS * SHARDS_PER_GPU,
            "last": GPUS - 1,
            "accounting": accounting,
            "dbd_port": self.dbd_port,
            "db_port": self.db_port,
            **self._node_values(node_ports),
        }
        self._write_slurm_conf()
        with open(os.path.join(self.root, "gres.conf"), "w") as f:
            for node in self.nodes:
                dev = self._dev(node)
                f.write(GRES_LINE.format(node=node, dev=dev, last=GPUS - 1))
                for i in range(GPUS):
                    f.write(SHARD_LINE.format(node=node, n=SHARDS_PER_GPU, dev=dev, i=i))

    def _dev(self, node: str) -> str:
        """The node's fake GPU device files (one set per node)."""
        return os.path.join(self.root, "dev") + ("" if node == "localhost" else f"-{node}")

    def _node_values(self, ports: list[int]) -> dict[str, str]:
        """slurm.conf's node lines; several nodes on this one host each have their own port
        (``NodeHostname=localhost Port=``), spool dir, pid and log file (``%n``: the node)."""
        several = len(self.nodes) > 1
        lines = "".join(
            NODE_LINE.format(
                name=node, gpus=GPUS, shards=GPUS * SHARDS_PER_GPU,
                where=f" NodeHostname=localhost Port={port}" if several else "",
            )
            for node, port in zip(self.nodes, ports, strict=True)
        )  # fmt: skip
        return {
            "node_lines": lines,
            "node_list": ",".join(self.nodes),
            "node_dir": "/%n" if several else "",
            "node_suffix": "-%n" if several else "",
        }

    def _write_slurm_conf(self) -> None:
        with open(self.conf, "w") as f:
            f.write(SLURM_CONF.format(first_job=self.first_job, **self.values))

    def _spawn(self, *argv: str, key: str = "") -> None:
        key = key or argv[0]
        with open(os.path.join(self.root, "log", f"{key}.stderr"), "ab") as log:
            self.procs[key] = subprocess.Popen(
                [_which(argv[0]) or argv[0], *argv[1:]],
                env={**os.environ, **self.env},
                stdout=log,
                stderr=log,
                start_new_session=True,
            )

    def start(self) -> None:
        self.write_config()
        if self.accounting:
            self._start_accounting()
        self._spawn("slurmctld", "-D", "-i", "-f", self.conf)
        for node, key in zip(self.nodes, self._slurmds(), strict=True):
            self._spawn("slurmd", "-D", "-N", node, "-f", self.conf, key=key)
        wait_until(self._idle, timeout=30, interval=0.05, message="the test Slurm nodes are idle")

    def _start_accounting(self) -> None:
        db = os.path.join(self.root, "db")
        os.makedirs(db)
        sock = os.path.join(self.root, "db.sock")
        self._spawn(
            "mariadbd", "--no-defaults", f"--datadir={db}", "--user=root",
            f"--port={self.db_port}", "--bind-address=127.0.0.1", f"--socket={sock}",
            "--skip-grant-tables", "--innodb-buffer-pool-size=16M",
            f"--log-error={self.root}/log/mariadb.log",
        )  # fmt: skip
        wait_until(lambda: os.path.exists(sock), timeout=30, message="MariaDB answers")
        path = os.path.join(self.root, "slurmdbd.conf")  # next to slurm.conf, as slurmdbd wants
        with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(SLURMDBD_CONF.format(**self.values))
        self._spawn("slurmdbd", "-D")
        wait_until(
            lambda: self.run("sacctmgr", "-i", "add", "cluster", self.cluster, check=False)
            .returncode == 0,
            timeout=30, interval=0.05, message="slurmdbd registers the cluster",
        )  # fmt: skip

    def forget(self) -> None:
        """Restart slurmctld with its state cleared: the jobs that ran are known to
        accounting only (if kept). Job ids go on from above the last one."""
        last = max([int(i.split("_")[0]) for i in self.job_ids(all_states=True)] or [0])
        ctld = self.procs.pop("slurmctld")
        ctld.terminate()
        ctld.wait(timeout=10)
        self.first_job = last + 100
        self._write_slurm_conf()
        self._spawn("slurmctld", "-D", "-c", "-i", "-f", self.conf)
        wait_until(  # the controller answers (its node comes back on its own, later)
            lambda: self.run("scontrol", "ping", check=False).stdout.count("UP") == 1,
            timeout=30, interval=0.05, message="slurmctld is back",
        )  # fmt: skip

    def _idle(self) -> bool:
        for p in self.procs.values():
            if p.poll() is not None:
                raise AssertionError(f"{p.args[0]} exited {p.returncode}:\n{self.logs()}")
        out = self.run("sinfo", "-h", "-N", "-o", "%t", check=False).stdout
        return out.split() == ["idle"] * len(self.nodes)

    # -- use --------------------------------------------------------------------------------

    def run(
        self, *argv: str, check: bool = True, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """A Slurm command against this cluster."""
        return subprocess.run(
            list(argv),
            env={**os.environ, **self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=30,
            check=check,
        )

    def job_ids(self, all_states: bool = False) -> list[str]:
        more = ["--states=all"] if all_states else []
        out = self.run("squeue", "-h", "-o", "%i", *more).stdout
        return out.split()

    def steps_alive(self) -> list[str]:
        """The step daemons still running (each keeps a socket in the spool dir)."""
        spool = os.path.join(self.root, "spool")
        dirs = [spool] + [os.path.join(spool, n) for n in self.nodes if n != "localhost"]
        names = []
        for d in dirs:
            try:
                names += os.listdir(d)
            except FileNotFoundError:
                pass
        return [n for n in names if _STEP_SOCKET.match(n)]

    def clear(self, timeout: float = 20) -> None:
        """Cancel every job and wait until none runs and no step daemon is left (an array
        by its own id: squeue's ``12_[3-9%2]`` is no id scancel takes)."""
        ids = sorted(set(self.run("squeue", "-h", "-o", "%F").stdout.split()))
        if ids:
            self.run("scancel", *ids, check=False)
        wait_until(
            lambda: not self.job_ids() and not self.steps_alive(),
            timeout=timeout,
            interval=0.05,
            message="every test Slurm job to end",
        )

    def logs(self) -> str:
        out = []
        for name in sorted(os.listdir(os.path.join(self.root, "log"))):
            with open(os.path.join(self.root, "log", name), errors="replace") as f:
                out.append(f"== {name}\n" + f.read()[-4000:])
        return "\n".join(out)

    # -- stop -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Jobs first (so no slurmstepd is orphaned), then slurmd, then slurmctld."""
        try:
            daemons = [self.procs.get(n) for n in ("slurmctld", *self._slurmds())]
            if all(p is not None and p.poll() is None for p in daemons):
                self.clear()
        finally:
            # the slurmds, slurmctld, then slurmdbd and its database
            for name in (*self._slurmds(), "slurmctld", "slurmdbd", "mariadbd"):
                p = self.procs.get(name)
                if p is None:
                    continue
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
                    try:
                        p.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()
            self._reap_steps()
            shutil.rmtree(self.root, ignore_errors=True)

    def _slurmds(self) -> list[str]:
        return ["slurmd" if n == "localhost" else f"slurmd-{n}" for n in self.nodes]

    def _reap_steps(self) -> None:
        """Last resort after a failure: kill step daemons of this cluster still alive (found
        by the socket they hold in its spool dir), never by name."""
        spool = os.path.join(self.root, "spool")
        deadline = time.monotonic() + 2
        while self.steps_alive() and time.monotonic() < deadline:
            for pid in _pids_with_open(spool):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)


def _pids_with_open(prefix: str) -> list[int]:
    """slurmstepd processes holding a UNIX socket bound under ``prefix`` (the inode of each
    listening socket's path is in /proc/net/unix; a process's fds show ``socket:[inode]``)."""
    inodes = set()
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            parts = line.split()
            if len(parts) >= 8 and parts[7].startswith(prefix):
                inodes.add(f"socket:[{parts[6]}]")
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/comm") as f:
                if f.read().strip() != "slurmstepd":
                    continue
            fds = os.listdir(f"/proc/{name}/fd")
            if any(os.readlink(f"/proc/{name}/fd/{fd}") in inodes for fd in fds):
                found.append(int(name))
        except OSError:
            continue
    return found
