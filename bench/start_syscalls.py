"""System calls a job costs the supervisors and the daemon's main thread on the start/end
path (issue 35.3): ``strace -c`` attached to the 8 supervisors of a warm daemon (16 jobs run
first) and to its main thread, over N trivial 1-GPU jobs (``true``) submitted at once. Counts
move little with the machine's load where times do (the daemon's own count does move: how a
burst batches its passes and commits). Run from the repository root (``--tree DIR``: another
checkout's daemon, e.g. ``git worktree add --detach /tmp/old REV``):

    .venv/bin/python bench/start_syscalls.py [N] [--tree DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

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


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("n", nargs="?", type=int, default=400)
    p.add_argument("--tree", help="the checkout to measure (default: this one)")
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
        each = [arg for s in sups for arg in ("-p", str(s))]
        tracers = [
            subprocess.Popen(["strace", "-c", "-o", sup_log, *each], stderr=subprocess.DEVNULL),
            subprocess.Popen(["strace", "-c", "-o", main_log, "-p", str(d.proc.pid)],
                             stderr=subprocess.DEVNULL),
        ]  # fmt: skip
        time.sleep(1.0)  # (attached)
        ids = d.submit_many([d.job(["true"], gpus=1) for _ in range(a.n)])
        d.wait_idle(ids[-1])
        time.sleep(0.3)
        for t in tracers:
            t.terminate()
            t.wait()
        print(json.dumps({
            "tree": daemon_bench.ROOT, "jobs": a.n, "supervisors": len(sups),
            "supervisor_syscalls_per_job": round(_total(sup_log) / a.n, 1),
            "daemon_main_syscalls_per_job": round(_total(main_log) / a.n, 1),
            "loadavg": os.getloadavg()[0],
        }))  # fmt: skip
    finally:
        d.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
