"""System calls a job costs the supervisors and the daemon's main thread on the start/end
path (issue 35.3): ``strace -c`` attached to the 8 supervisors of a warm daemon (16 jobs run
first) and to its main thread, over N trivial 1-GPU jobs (``true``) submitted at once. Counts
move little with the machine's load where times do (the daemon's own count does move: how a
burst batches its passes and commits). Run from the repository root (``--tree DIR``: another
checkout's daemon, e.g. ``git worktree add --detach /tmp/old REV``):

    .venv/bin/python bench/start_syscalls.py [N] [--tree DIR] [--shape submits|file|array]

``--shape``: how the N jobs are submitted (the 16 warm-up jobs always as ``submits``):
``submits`` (the default), the bench's pipelined submits, each a minimal spec (its
environment PATH alone); ``file``, one ``berth submit -g 1 --file`` of N ``true`` lines, and
``array``, one ``berth submit -g 1 --array 0-(N-1) -- true``: both through the tree's CLI in a
process of its own with the bench's environment (each job's spec carries it, as a user's
does). ``--env-bytes B``: for ``submits``, each spec carries that much more environment
(``BENCH_PAD=x...``), to tell what the environment's size costs from what the shape costs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import daemon_bench


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])


def _supervisors(daemon_pid: int) -> list[int]:
    """The daemon's supervisors (its children, or the fork server's)."""
    names = subprocess.run(["pgrep", "-x", "berth-sup"], capture_output=True, text=True)
    out = []
    for p in (int(x) for x in names.stdout.split()):
        try:
            parent = _ppid(p)
            if daemon_pid in (parent, _ppid(parent)):
                out.append(p)
        except (OSError, ValueError):
            continue
    return out


def _total(path: str) -> int:
    """The calls of ``strace -c``'s total line."""
    with open(path) as f:
        for line in f:
            cols = line.split()
            if cols and cols[-1] == "total":
                return int(cols[3] if len(cols) == 6 else cols[2])
    return 0


def env_bytes(d: daemon_bench.Daemon, a: argparse.Namespace) -> int:
    """The size of the environment each job's spec carries (its JSON)."""
    if a.shape == "submits":
        return len(json.dumps(pad(d, a)["env"]))
    return len(json.dumps(d.env))


def pad(d: daemon_bench.Daemon, a: argparse.Namespace) -> dict[str, Any]:
    job = d.job(["true"], gpus=1)
    if a.env_bytes:
        job["env"] = {**job["env"], "BENCH_PAD": "x" * a.env_bytes}
    return job


def submit(d: daemon_bench.Daemon, a: argparse.Namespace) -> None:
    """The N jobs, in the shape asked; back once the last has ended."""
    if a.shape == "submits":
        ids = d.submit_many([pad(d, a) for _ in range(a.n)])
        d.wait_idle(ids[-1])
        return
    if a.shape == "file":
        path = os.path.join(d.dir, "jobs.txt")
        with open(path, "w") as f:
            f.write("true\n" * a.n)
        argv = ["submit", "-g", "1", "--file", path]
    else:
        argv = ["submit", "-g", "1", "--array", f"0-{a.n - 1}", "--", "true"]
    subprocess.run([sys.executable, "-m", "berth.cli.main", *argv], env=d.env,
                   cwd=daemon_bench.ROOT, check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    d.wait_idle(16 + a.n)  # (after the 16 warm-up jobs: ids 17..16+N)


def _times(pids: list[int]) -> tuple[float, float]:
    tick, user, system = os.sysconf("SC_CLK_TCK"), 0, 0
    for p in pids:
        with open(f"/proc/{p}/stat", "rb") as f:
            x = f.read().rsplit(b")", 1)[1].split()
        user, system = user + int(x[11]), system + int(x[12])
    return user / tick, system / tick


def _cpu(d: daemon_bench.Daemon, a: argparse.Namespace, sups: list[int]) -> int:
    perf = None
    if a.perf:
        pids = ",".join(str(s) for s in sups)
        perf = subprocess.Popen(["perf", "record", "-g", "-o", a.perf, "-p", pids],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(1.0)  # (attached)
    u0, s0 = _times(sups)
    submit(d, a)
    u1, s1 = _times(sups)
    if perf is not None:
        perf.send_signal(2)
        perf.wait()
    print(json.dumps({
        "tree": daemon_bench.ROOT, "shape": a.shape, "env_bytes": env_bytes(d, a), "jobs": a.n,
        "supervisors": len(sups), "supervisor_user_ms_per_job": round((u1 - u0) / a.n * 1000, 3),
        "supervisor_sys_ms_per_job": round((s1 - s0) / a.n * 1000, 3),
        "loadavg": os.getloadavg()[0],
    }))  # fmt: skip
    return 0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("n", nargs="?", type=int, default=400)
    p.add_argument("--tree", help="the checkout to measure (default: this one)")
    p.add_argument("--shape", choices=("submits", "file", "array"), default="submits")
    p.add_argument(
        "--cpu",
        action="store_true",
        help="no strace: the supervisors' CPU (user, system) a job instead",
    )
    p.add_argument(
        "--perf", metavar="FILE", help="with --cpu: `perf record -g` of the supervisors into FILE"
    )
    p.add_argument("--env-bytes", type=int, default=0, help="submits: this much more env")
    a = p.parse_args()
    if a.tree:
        daemon_bench.ROOT = os.path.abspath(a.tree)
    d = daemon_bench.Daemon(gpus=8)
    out = tempfile.mkdtemp(prefix="start-syscalls-")
    sup_log, main_log = os.path.join(out, "sup"), os.path.join(out, "main")
    try:
        ids = d.submit_many([d.job(["true"], gpus=1) for _ in range(16)])
        d.wait_idle(ids[-1])  # (its supervisors forked and warm)
        sups = _supervisors(d.proc.pid)
        if a.cpu:
            return _cpu(d, a, sups)
        each = [arg for s in sups for arg in ("-p", str(s))]
        tracers = [
            subprocess.Popen(["strace", "-c", "-o", sup_log, *each], stderr=subprocess.DEVNULL),
            subprocess.Popen(["strace", "-c", "-o", main_log, "-p", str(d.proc.pid)],
                             stderr=subprocess.DEVNULL),
        ]  # fmt: skip
        time.sleep(1.0)  # (attached)
        submit(d, a)
        time.sleep(0.3)
        for t in tracers:
            t.terminate()
            t.wait()
        print(json.dumps({
            "tree": daemon_bench.ROOT, "shape": a.shape, "env_bytes": env_bytes(d, a),
            "jobs": a.n, "supervisors": len(sups),
            "supervisor_syscalls_per_job": round(_total(sup_log) / a.n, 1),
            "daemon_main_syscalls_per_job": round(_total(main_log) / a.n, 1),
            "loadavg": os.getloadavg()[0],
        }))  # fmt: skip
    finally:
        d.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
