"""The engine's own CPU per job on the start path, without sockets or supervisors: N queued
1-GPU jobs on 8 GPUs drained by the daemon's engine in this process (tests/daemon/enginekit.py's
``EngineRig``: the real store, the real claim ledger in /dev/shm with its listing kept as
the daemon keeps it, fake supervisors), each
attempt ending as soon as it started. What it counts, on the thread's CPU clock: the passes,
the claims, the write-ahead and the hand-over, the ends, the commits (on the loop's thread
here). Deterministic where the daemon's bench is not: every pass starts 8 jobs, so a tree's
figure moves little with the machine's load.

    .venv/bin/python bench/engine_drain.py [--jobs 2000] [--policy guarded] [--base TREE] [--rounds 2] [--one]

``--one``: the dispatch gap's shape instead: the 8 GPUs filled first, then one attempt ends at
a time and the pass it kicks starts one job (the figure is per end and start: the pass, its
claim, the write-ahead, the hand-over, the end, the commit).

``--base TREE``: also an earlier checkout (``git worktree add /tmp/old X``), its engine and
its enginekit, alternating with this one, each run in a fresh interpreter.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import asyncio, json, logging, os, pathlib, sys, tempfile, time
tree, n, policy = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.path[:0] = [f"{tree}/tests", f"{tree}/tests/daemon", tree]
logging.disable(logging.WARNING)
from enginekit import EngineRig
from berth.daemon.engine.admission import admit
tmp = pathlib.Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
rig = EngineRig(tmp, gpus=8, policy=policy)
from berth.claims.ledger import Ledger
rig.engine.res.ledger = Ledger(rig.ledger.path, keep=True)  # (the daemon's: a kept listing)
rig.engine.pauses.queue = True  # (all queued before the first pass)
spec = {"argv": ["true"], "env": {"PATH": "/bin"}, "cwd": str(tmp), "gpus": 1}
for _ in range(n):
    rig.loop.run_until_complete(admit.submit(rig.engine, rig.peer, dict(spec)))
rig.engine.pauses.queue = False
engine, procs = rig.engine, rig.procs
one = len(sys.argv) > 4 and sys.argv[4] == "one"
if one:  # the GPUs filled first: then each pass follows one end and makes one start
    engine.schedule_pass()
    rig.loop.run_until_complete(asyncio.sleep(0))
    procs.poll_gates()
t0, w0, passes = time.thread_time(), time.perf_counter(), 0
while engine.jobs and not (one and passes >= n - 16):
    if one:
        running = procs.running()
        if running:
            engine._next_pass = 0.0  # (ends far apart: no pass is paced)
            procs._end(running[0], rc=0)
        rig.loop.run_until_complete(asyncio.sleep(0))  # (the pass that end kicks)
        rig.loop.run_until_complete(asyncio.sleep(0))  # (its commit's follow-ups)
        procs.poll_gates()
        passes += 1
        continue
    engine.schedule_pass()
    passes += 1
    rig.loop.run_until_complete(asyncio.sleep(0))
    procs.poll_gates()
    for a in procs.running():
        procs._end(a, rc=0)
    rig.loop.run_until_complete(asyncio.sleep(0))
cpu = time.thread_time() - t0
n = passes if one else n  # (--one: per end and start)
print(json.dumps({"tree": tree, "policy": policy, "jobs": n, "passes": passes, "one": one,
                  "cpu_ms_per_job": round(cpu / n * 1000, 4),
                  "wall_s": round(time.perf_counter() - w0, 2), "loadavg": os.getloadavg()[0]}))
rig.close()
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--policy", default="guarded")
    ap.add_argument("--base", metavar="TREE", help="an earlier checkout to run alternately")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--one", action="store_true", help="one end, then one start, a pass")
    args = ap.parse_args()
    trees = [ROOT] if not args.base else [args.base, ROOT]
    for r in range(args.rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            out = subprocess.run(
                [sys.executable, "-c", CHILD, tree, str(args.jobs), args.policy]
                + (["one"] if args.one else []),
                capture_output=True, text=True, cwd=tree,
            )  # fmt: skip
            print(out.stdout.strip() or out.stderr[-2000:], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
