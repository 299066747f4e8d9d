"""Scheduling quality on the Microsoft ITP 2021 traces (issue 5's bench, part 1).

    .venv/bin/python bench/sim_itp.py [--traces ../shared/traces] [--quick] [--wait]

1. ITP cluster05 on one 8-GPU server at offered load 0.6, 0.9, 1.2 (time-stretch), every
   policy, time limits = the durations (oracle) and = durations rounded up as people type them.
2. ITP cluster08 on 8 nodes x 8 GPUs, as recorded (native load ~1.03 on 64 GPUs).
3. Fairness: ITP clusters 01, 05, 09, 10 as four tenants, days 26.2-52.5, on 8 x 8 GPUs.
4. (--wait: this part only) The wait guarantee (issue 32.1): all ten ITP clusters on one 8-GPU
   server at load 0.9, limits rounded: each policy's mean JCT and longest wait over strict
   FIFO's, for fifo, balanced, sjf and guarded; goal: guarded's longest wait <= 1.5x FIFO's
   and its mean JCT no worse than balanced's.

Prints tables (hours) with each policy's mean JCT over strict FIFO's (xfifo) and checks the
goals: the default policy's mean JCT <= 0.6 x FIFO at load 0.9 with the longest wait
reported; backfill utilisation within 5% of the best policy's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from berth.core.policy import DEFAULT_POLICY, POLICIES
from berth.sim import report, traces, workload
from berth.sim.run import Workload, compare, prepare
from berth.sim.traces import SimJob

ORDER = ["fifo", *[p for p in POLICIES if p != "fifo"]]


def show(title: str, rows: list[dict[str, object]]) -> None:
    base = report.add_ratios(rows)
    print(f"\n## {title}\n")
    print(report.table(rows, base))


def goals(rows: list[dict[str, object]], label: str) -> None:
    by = {r["policy"]: r for r in rows}
    fifo, default = by["fifo"], by[DEFAULT_POLICY]
    ratio = float(default["jct_mean"]) / float(fifo["jct_mean"])  # type: ignore[arg-type]
    best = max(float(r["utilisation"]) for r in rows)  # type: ignore[arg-type]
    bf = float(by["fifo-backfill"]["utilisation"])  # type: ignore[arg-type]
    print(
        f"goal [{label}] default ({DEFAULT_POLICY}) mean JCT / strict FIFO = {ratio:.2f} "
        f"(target <= 0.60: {'MET' if ratio <= 0.6 else 'MISSED'}); longest wait "
        f"{float(default['wait_max']) / 3600:.1f} h (FIFO {float(fifo['wait_max']) / 3600:.1f} h)"
    )  # type: ignore[arg-type]
    print(
        f"goal [{label}] backfill utilisation {bf:.3f} vs best {best:.3f}: "
        f"{100 * (best - bf) / best:.1f}% below (target <= 5%: {'MET' if best - bf <= 0.05 * best else 'MISSED'})"
    )


def waits(itp: str) -> None:
    """Part 4: mean JCT and longest wait over strict FIFO's on each ITP cluster."""
    pols = ["fifo", "balanced", "sjf", "guarded"]
    print("\n## Mean JCT / longest wait over strict FIFO's, ITP clusters on 8 GPUs, load 0.9, "
          "limits round\n")  # fmt: skip
    print("cluster  jobs  FIFO max wait h  " + "  ".join(f"{p:>14}" for p in pols[1:])
          + "  guarded: max<=1.5x, mean<=balanced")  # fmt: skip
    for c in range(1, 11):
        wl = prepare(os.path.join(itp, f"cluster{c:02d}.csv"), inventory="8", load=0.9,
                     time_limits="round")  # fmt: skip
        rows, _ = compare(wl, pols)
        by = {r["policy"]: r for r in rows}
        f = by["fifo"]
        ratio = {p: (float(by[p]["jct_mean"]) / float(f["jct_mean"]),
                     float(by[p]["wait_max"]) / float(f["wait_max"])) for p in pols}  # fmt: skip
        cells = "  ".join(f"{ratio[p][0]:.3f} / {ratio[p][1]:4.2f}x" for p in pols[1:])
        g, b = ratio["guarded"], ratio["balanced"]
        ok = f"{'MET' if g[1] <= 1.5 else 'MISSED'}, {'MET' if g[0] <= b[0] else 'MISSED'}"
        print(f"c{c:02d}    {len(wl.jobs):>6}  {float(f['wait_max']) / 3600:>15.0f}  {cells}  {ok}",
              flush=True)  # fmt: skip
    print("(each cell: mean JCT over FIFO's / longest wait over FIFO's)")


def merged(tr: str) -> Workload:
    jobs: list[SimJob] = []
    for c in ("cluster01", "cluster05", "cluster09", "cluster10"):
        jobs += traces.read(os.path.join(tr, "microsoft_itp_2021/raw", f"{c}.csv"), shift=False)
    for j in jobs:
        j.duration = min(j.duration, 7 * 86400.0)
    jobs = workload.window(traces.normalise(jobs, shift=False), 26.2, 52.5 - 26.2)
    inv = workload.inventory("8x8")
    workload.time_limits(jobs, "exact")
    rho = workload.offered_load(jobs, 64)
    return Workload(jobs, inv, rho, rho)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--traces", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "traces")
    )
    ap.add_argument("--quick", action="store_true", help="part 1 only")
    ap.add_argument("--wait", action="store_true", help="part 4 only (the wait guarantee)")
    a = ap.parse_args()
    itp = os.path.join(a.traces, "microsoft_itp_2021", "raw")
    t0 = time.perf_counter()
    if a.wait:
        waits(itp)
        print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s")
        return 0
    for limits in ("exact", "round"):
        rows = []
        for load in (0.6, 0.9, 1.2):
            wl = prepare(
                os.path.join(itp, "cluster05.csv"), inventory="8", load=load, time_limits=limits
            )
            r, _ = compare(wl, ORDER)
            rows += r
            if load == 0.9:
                goals(r, f"cluster05 @0.9, limits {limits}")
        show(f"ITP cluster05 on 8 GPUs, time limits: {limits}", rows)
    if a.quick:
        return 0
    wl = prepare(os.path.join(itp, "cluster08.csv"), inventory="8x8", time_limits="exact")
    rows, _ = compare(wl, ORDER)
    show(f"ITP cluster08 on 8x8 GPUs, as recorded (load {wl.load:.2f}), limits exact", rows)
    goals(rows, "cluster08 8x8")
    wl = merged(a.traces)
    rows, _ = compare(wl, ORDER)
    show(f"ITP 01+05+09+10 as four tenants, days 26.2-52.5, 8x8 GPUs (load {wl.load:.2f})", rows)
    for r in rows:
        per = ", ".join(
            f"{k.replace('cluster', 'c')} {v:.1f}" for k, v in r["tenant_slowdown"].items()
        )  # type: ignore[union-attr]
        print(f"  {r['policy']:>13}: mean slowdown per tenant: {per}; Jain {r['jain']:.3f}")
    waits(itp)
    print(f"\ntotal wall time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
