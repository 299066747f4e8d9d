"""Where the engine's CPU goes in one end and the next start, phase by phase (issue 35): the
shape of ``engine_drain.py --one`` (8 GPUs full, then one attempt ends at a time and the pass
it kicks starts one job), with each phase's function wrapped to add up its thread CPU time.
Microseconds per end and start; a phase inside another is counted in both (``pass`` holds
``pass.schedule``...). The wrappers cost ~0.3 us a call: totals sit a little above
``engine_drain.py --one``'s. Run from the repository root:

    .venv/bin/python bench/pass_phases.py [--jobs 2000] [--base TREE] [--rounds 2]

``--base TREE``: also an earlier checkout (``git worktree add --detach /tmp/old REV``), run
alternately, each in a fresh interpreter; a phase a tree lacks is left out of its row.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import asyncio, collections, json, logging, os, pathlib, sys, tempfile, time
tree, n = sys.argv[1], int(sys.argv[2])
sys.path[:0] = [f"{tree}/tests", f"{tree}/tests/daemon", tree]
logging.disable(logging.WARNING)
from enginekit import EngineRig
from berth.daemon.engine.admission import admit
from berth.claims.ledger import Ledger
tmp = pathlib.Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
rig = EngineRig(tmp, gpus=8, policy="guarded")
engine, procs = rig.engine, rig.procs
engine.res.ledger = Ledger(rig.ledger.path, keep=True)  # (the daemon's: a kept listing)
engine.pauses.queue = True
spec = {"argv": ["true"], "env": {"PATH": "/bin"}, "cwd": str(tmp), "gpus": 1}
for _ in range(n):
    rig.loop.run_until_complete(admit.submit(engine, rig.peer, dict(spec)))
engine.pauses.queue = False
engine.schedule_pass(); rig.loop.run_until_complete(asyncio.sleep(0)); procs.poll_gates()
acc = collections.Counter()
def wrap(owner, name, label):
    real = getattr(owner, name, None)
    if real is None:
        return
    def timed(*a, **k):
        t = time.thread_time_ns()
        try:
            return real(*a, **k)
        finally:
            acc[label] += time.thread_time_ns() - t
    setattr(owner, name, timed)
import berth.daemon.engine.engine as E, berth.claims.together as T
from berth.daemon.store.store import Store
e = engine
for owner, name, label in [
    (e, "_pass", "pass"), (e, "outside_usage", "pass.outside_usage"),
    (e.res.ledger, "scan", "pass.outside_usage.scan"), (E, "schedule", "pass.schedule"),
    (type(getattr(e, "kept", None)), "capacity", "pass.kept_capacity"),
    (e.diskfull, "claim_each", "pass.claims"), (e.res.ledger, "_create", "pass.claims.create"),
    (T, "conflicts_each", "pass.claims.check"), (e.launcher, "_launch", "pass.launch"),
    (e.journal, "flush", "pass.launch.journal_flush"), (Store, "save_row", "pass.launch.journal_flush.rows"),
    (e.launcher, "_hand_over", "pass.launch.hand_over"), (e.control, "_on_done", "end"),
    (e.control, "_change", "end.change"), (e.res.ledger, "withdraw", "end.withdraw"),
]:
    if owner is not type(None):
        wrap(owner, name, label)
t0, cycles = time.thread_time(), 0
while engine.jobs and cycles < n - 16:
    running = procs.running()
    if running:
        engine._next_pass = 0.0  # (ends far apart: no pass is paced)
        procs._end(running[0], rc=0)
    rig.loop.run_until_complete(asyncio.sleep(0))  # (the pass that end kicks)
    rig.loop.run_until_complete(asyncio.sleep(0))  # (its commit's follow-ups)
    procs.poll_gates()
    cycles += 1
total = time.thread_time() - t0
out = {"tree": tree, "cycles": cycles, "loadavg": os.getloadavg()[0],
       "us_per_end_and_start": round(total / cycles * 1e6, 1)}
out.update({k: round(acc[k] / cycles / 1000, 1) for k in sorted(acc)})
print(json.dumps(out))
rig.close()
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--base", metavar="TREE", help="an earlier checkout to run alternately")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    trees = [ROOT] if not args.base else [args.base, ROOT]
    for r in range(args.rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            out = subprocess.run([sys.executable, "-c", CHILD, tree, str(args.jobs)],
                                 capture_output=True, text=True, cwd=tree)  # fmt: skip
            print(out.stdout.strip() or out.stderr[-2000:], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
