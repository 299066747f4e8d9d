"""Backfill by learned run times (`[scheduling] predict = true`, issue 33.4) against backfill
by time limits only, in the simulator.

    .venv/bin/python bench/sim_predict.py [--traces ../shared/traces] [--quick] [--noise 0.2]

The workload: Philly's jobs of a VC (their submit times, durations and GPU counts), each
given one of a few hundred recurring names, as a team's scripts recur: names follow the
durations (the jobs sorted by duration, cut into :data:`NAMES` runs of names) and one job in
five takes a name at random (a script that does not always run as long). One job in four
gives a time limit as people type them (rounded up: 10m, 30m, 1h ... 7d), the others none.
Each VC is time-stretched to offered load 0.9 on its GPUs, and replayed by the default policy
(EASY backfill) with and without `predict`: mean JCT and the longest wait, both in hours.
Kept only if both improve (printed: KEEP or DROP; a VC of 1-GPU jobs only never reserves, so
there it changes nothing).
"""

from __future__ import annotations

import argparse
import os
import random
import sys

from berth.core.policy import DEFAULT_POLICY
from berth.sim import traces, workload
from berth.sim.engine import simulate
from berth.sim.metrics import metrics
from berth.sim.traces import SimJob

NAMES = 300  # recurring names per VC
NOISE = 0.2  # the part of jobs whose name is drawn at random
LIMITED = 0.25  # the part of jobs that give a time limit (rounded up, as people type)
VCS = (("103959", 32), ("0e4a51", 64), ("ed69ec", 16), ("2869ce", 32))


def named(jobs: list[SimJob], seed: int = 1) -> list[SimJob]:
    """The jobs with recurring names and, one in four, a typed time limit (see the module)."""
    rng = random.Random(seed)
    ranked = sorted(range(len(jobs)), key=lambda i: (jobs[i].duration, i))
    for rank, i in enumerate(ranked):
        j = jobs[i]
        k = rng.randrange(NAMES) if rng.random() < NOISE else rank * NAMES // len(jobs)
        j.name = f"{j.tenant or 'vc'}-job{k}"
        if rng.random() < LIMITED:
            workload.time_limits([j], "round")
        else:
            j.time_limit = None
    return jobs


def vc_jobs(path: str, vc: str, gpus: int, rho: float, quick: bool) -> list[SimJob]:
    jobs = [j for j in traces.read(path, "philly") if j.tenant == vc and 0 < j.gpus <= gpus]
    jobs = traces.normalise(sorted(jobs, key=lambda j: j.submit))
    if quick:
        jobs = jobs[:400]
    return named(workload.scale_to(jobs, gpus, rho))


def main() -> int:
    global NOISE
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--traces", default=os.path.join(here, "..", "..", "shared", "traces"))
    ap.add_argument("--rho", type=float, default=0.9)
    ap.add_argument("--quick", action="store_true", help="400 jobs per VC")
    ap.add_argument("--noise", type=float, default=NOISE, help="the part of random names")
    args = ap.parse_args()
    NOISE = args.noise
    path = os.path.join(args.traces, "philly_pollux", "philly.csv")
    print(f"policy {DEFAULT_POLICY}, load {args.rho:g}, {NAMES} names per VC, "
          f"{NOISE:.0%} of names random, {LIMITED:.0%} with limits\n")  # fmt: skip
    print("| VC | GPUs | jobs | mean JCT h (limits / predict) | max wait h (limits / predict) | |")
    print("|---|---|---|---|---|---|")
    keep, gained = True, False
    for vc, gpus in VCS:
        base = vc_jobs(path, vc, gpus, args.rho, args.quick)
        inv = workload.inventory(str(gpus))
        row = []
        for predict in (False, True):
            jobs = [SimJob(**{f: getattr(j, f) for f in SimJob.__dataclass_fields__}) for j in base]
            m = metrics(simulate(jobs, inv, policy=DEFAULT_POLICY, timeline=False,
                                 predict=predict))  # fmt: skip
            row.append((m["jct_mean"] / 3600, m["wait_max"] / 3600))
        (j0, w0), (j1, w1) = row
        same = abs(j1 - j0) < 1e-9 and abs(w1 - w0) < 1e-9
        better = j1 < j0 and w1 < w0
        worse = j1 > j0 + 1e-9 or w1 > w0 + 1e-9
        keep &= not worse
        gained |= better
        print(f"| {vc} | {gpus} | {len(base)} | {j0:.2f} / {j1:.2f} ({j1 / j0:.2f}x) | "
              f"{w0:.1f} / {w1:.1f} ({w1 / w0:.2f}x) | "
              f"{'both better' if better else 'the same' if same else 'WORSE' if worse else 'mixed'} |")
    keep &= gained
    print("\npredict: " + ("KEEP (mean JCT and max wait both better, or unchanged, on every VC)"
                          if keep else "DROP (worse somewhere, or better nowhere)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
