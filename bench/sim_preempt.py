"""Preemption of opted-in jobs, measured (issue 32.5): does it help?

    .venv/bin/python bench/sim_preempt.py [--traces ../shared/traces] [--clusters 09,01]

The ten Microsoft ITP clusters on one 8-GPU server at offered load 0.9, limits rounded (as
``bench/sim_itp.py --wait``), under the default ``guarded`` policy, with
:mod:`berth.core.preempt`'s rule (its defaults: time left >= 8x the waiting job's limit, after
10 min of run, once per job, 60 s grace) when 0 %, 50 % (a seeded draw per job) or 100 % of
the jobs opted in (``--requeue``). 0 % is ``guarded`` itself (no job may be preempted:
tests/sim/test_sim_preempt.py checks the replay is the same). A preempted job starts again
from nothing (Slurm's requeue); the last column is the best case, where it resumes from a
checkpoint taken in the grace. Each cell: mean JCT over strict FIFO's / longest wait over
FIFO's (a preempted job's wait runs to its last start: its lost run counts) / GPU time lost to
preemption, as a share of the trace's GPU time. With a checkpoint, the run a job kept is not
counted as wait. Then a sweep of the rule's ratio on c09.

Verdict per column: it helps where mean JCT is below ``guarded``'s with the longest wait
<= 1.5x FIFO's.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

from berth.core.preempt import Rule
from berth.sim.engine import simulate
from berth.sim.metrics import metrics
from berth.sim.run import Workload, prepare

RULE = Rule()


def run(wl: Workload, opted: float, rule: Rule | None, checkpoint: bool = False,
        seed: int = 0, policy: str = "guarded") -> tuple[float, float, float]:  # fmt: skip
    """(mean JCT s, longest wait s, share of GPU time lost) with ``opted`` of jobs opted in."""
    draw = random.Random(seed)
    for j in wl.jobs:
        j.requeue = draw.random() < opted
    r = simulate(wl.jobs, wl.inv, policy=policy, timeline=False, preempt=rule,
                 checkpoint=checkpoint)  # fmt: skip
    m = metrics(r)
    total = sum(j.gpus * j.duration for j in wl.jobs)
    wait = float(m["wait_max"])
    if r.saved:  # (checkpoint: the run a job kept is not wait)
        wait = max(r.start[i] - j.submit - r.saved.get(i, 0.0) for i, j in enumerate(wl.jobs))
    return float(m["jct_mean"]), wait, r.lost / total


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--traces", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "traces")
    )
    ap.add_argument("--clusters", default=",".join(f"{c:02d}" for c in range(1, 11)))
    a = ap.parse_args()
    itp = os.path.join(a.traces, "microsoft_itp_2021", "raw")
    t0 = time.perf_counter()
    cols = [("guarded (0 %)", 0.0, None, False), ("50 % opted", 0.5, RULE, False),
            ("100 % opted", 1.0, RULE, False), ("100 %, checkpoint", 1.0, RULE, True)]  # fmt: skip
    print(f"## Preemption (rule {RULE}), ITP clusters on 8 GPUs, load 0.9, limits round\n")
    print("cluster  jobs  FIFO wait h  " + "  ".join(f"{c[0]:>24}" for c in cols))
    helps = {c[0]: 0 for c in cols[1:]}
    names = a.clusters.split(",")
    for c in names:
        wl = prepare(os.path.join(itp, f"cluster{c}.csv"), inventory="8", load=0.9,
                     time_limits="round")  # fmt: skip
        fj, fw, _ = run(wl, 0.0, None, policy="fifo")
        cells, base = [], 0.0
        for name, opted, rule, ckpt in cols:
            jct, wait, lost = run(wl, opted, rule, ckpt, seed=int(c))
            base = base or jct
            cells.append(f"{jct / fj:.3f} / {wait / fw:4.2f}x / {100 * lost:4.1f}%")
            if rule is not None and jct < base and wait <= 1.5 * fw:
                helps[name] += 1
        print(f"c{c}  {len(wl.jobs):>6}  {fw / 3600:>11.0f}  " + "  ".join(f"{x:>24}" for x in cells),
              flush=True)  # fmt: skip
    print("(each cell: mean JCT / FIFO's, longest wait / FIFO's, GPU time lost to preemption)")
    print("helps (mean below guarded's, longest wait <= 1.5x FIFO): "
          + ", ".join(f"{k}: {v} of {len(names)}" for k, v in helps.items()))  # fmt: skip
    if "09" in names:
        print("\n## c09, 100 % opted in, the rule's ratio (time left / the waiting job's limit)\n")
        wl = prepare(os.path.join(itp, "cluster09.csv"), inventory="8", load=0.9,
                     time_limits="round")  # fmt: skip
        fj, fw, _ = run(wl, 0.0, None, policy="fifo")
        gj = run(wl, 0.0, None)[0]
        print(f"guarded without preemption: {gj / fj:.3f}")
        for ratio in (2.0, 4.0, 8.0, 16.0):
            rule = Rule(ratio=ratio)
            for ckpt in (False, True):
                jct, wait, lost = run(wl, 1.0, rule, ckpt)
                print(f"ratio {ratio:>4g} {'checkpoint' if ckpt else 'restart   '}: "
                      f"{jct / fj:.3f} / {wait / fw:4.2f}x / {100 * lost:4.1f}% lost", flush=True)  # fmt: skip
    print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
