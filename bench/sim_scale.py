"""How fast is the simulator, and one scheduling pass? (issue 5: "100,000 jobs on 64 GPUs
should take seconds to a minute")

    .venv/bin/python bench/sim_scale.py [--traces ../shared/traces] [--jobs 100000]

1. 100,000 jobs drawn from ITP cluster08's shapes and durations, Poisson arrivals at offered
   load 0.9 on 8 nodes x 8 GPUs: wall time per policy, scheduling passes per second.
2. One pass of ``schedule()`` over a long queue (1,000 / 10,000 / 100,000 pending jobs, 8
   GPUs all busy plus one free): the dispatch pass (explain=False, stops once nothing fits)
   and the explaining pass (a reason for every job, as `berth queue` wants).
3. The whole Philly trace (82,244 jobs; issue 10: "balanced <= 2x fifo's time") on 8 nodes x
   8 GPUs at offered load 0.9: fifo and balanced, each the best of ``--repeat`` runs, and
   the ratio (``--philly-only`` for this part alone).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from berth.core import GIB, Gpu, Inputs, Job, Request, State, schedule, transition
from berth.core.policy import POLICIES
from berth.sim.run import compare, prepare


def one_pass(n: int, explain: bool, policy: str) -> float:
    gpus = [Gpu(i, f"G{i}", "A100", 80 * GIB) for i in range(8)]
    running = []
    for i in range(7):
        j = Job(id=i + 1, submit_time=0.0, request=Request(gpus=1), time_limit=3600.0)
        transition(j, State.RUNNING, now=0.0, gpus=(i,))
        running.append(j)
    pending = [Job(id=100 + i, submit_time=float(i), request=Request(gpus=2 if i % 3 else 1),
                   time_limit=600.0 * (1 + i % 7)) for i in range(n)]  # fmt: skip
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        schedule(Inputs(pending, running, gpus, now=float(n), policy=policy, explain=explain))
        best = min(best, time.perf_counter() - t)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--traces", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "traces")
    )
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=2, help="Philly: best of N runs")
    ap.add_argument("--philly-only", action="store_true")
    a = ap.parse_args()
    if a.philly_only:
        return philly(a.traces, a.repeat)
    path = os.path.join(a.traces, "microsoft_itp_2021", "raw", "cluster08.csv")
    wl = prepare(path, inventory="8x8", poisson=a.jobs, load=0.9, seed=1, time_limits="exact")
    print(
        f"## {len(wl.jobs)} jobs (ITP cluster08 shapes, Poisson, load {wl.load:.2f}) on 8x8 GPUs\n"
    )
    print(
        f"{'policy':>13}  {'wall s':>7}  {'passes':>7}  {'passes/s':>8}  {'JCT mean h':>10}  {'max wait h':>10}"
    )
    for policy in ("fifo", *[p for p in POLICIES if p != "fifo"]):
        rows, _ = compare(wl, [policy])
        r = rows[0]
        print(
            f"{policy:>13}  {r['wall_s']:7.1f}  {r['passes']:7d}  {r['passes'] / r['wall_s']:8.0f}"
            f"  {r['jct_mean'] / 3600:10.2f}  {r['wait_max'] / 3600:10.1f}"
        )
        sys.stdout.flush()
    print("\n## one schedule() pass, 8 GPUs (7 busy), default policy\n")
    print(f"{'pending':>8}  {'dispatch ms':>11}  {'explain ms':>10}")
    for n in (1_000, 10_000, 100_000):
        d = one_pass(n, False, "balanced")
        e = one_pass(n, True, "balanced")
        print(f"{n:>8}  {d * 1000:11.1f}  {e * 1000:10.1f}")
    return philly(a.traces, a.repeat)


def philly(traces: str, repeat: int) -> int:
    path = os.path.join(traces, "philly_pollux", "philly.csv")
    wl = prepare(path, inventory="8x8", load=0.9)
    print(f"\n## the whole Philly trace: {len(wl.jobs)} jobs on 8x8 GPUs, load {wl.load:.2f}\n")
    print(f"{'policy':>9}  {'wall s':>7}  {'passes':>7}  {'JCT mean h':>10}")
    best: dict[str, float] = {}
    for policy in ("fifo", "balanced"):
        for _ in range(repeat):
            rows, _ = compare(wl, [policy])
            r = rows[0]
            best[policy] = min(best.get(policy, float("inf")), r["wall_s"])
        print(f"{policy:>9}  {best[policy]:7.1f}  {r['passes']:7d}  {r['jct_mean'] / 3600:10.2f}")
        sys.stdout.flush()
    print(f"\nbalanced / fifo: {best['balanced'] / best['fifo']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
