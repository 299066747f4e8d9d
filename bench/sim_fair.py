"""Fair share between tenants (issue 11.3): each policy without and with fair share by decayed
usage (the system daemon's order between users), on multi-tenant traces.

    .venv/bin/python bench/sim_fair.py [--traces ../shared/traces] [--half-life 7d]

1. ITP clusters 01, 05, 09, 10 as four tenants, days 26.2-52.5, on 8 x 8 GPUs (as
   bench/sim_itp.py part 3).
2. Philly, its virtual clusters as tenants, days 27-41 (October 2017), thinned to an offered
   load of about 1.15 on 8 x 8 GPUs.

Prints, per run, the usual table (hours) with "jain svc": Jain's index over the tenants'
normalized service while they waited (berth.sim.fairness), and per tenant GPU-hours, mean
wait and service.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from sim_itp import merged

from berth.sim import report
from berth.sim.run import Workload, compare, prepare
from berth.units import parse_duration

POLICIES = ["fifo-backfill", "balanced"]


def run(title: str, wl: Workload, half_life: float) -> None:
    rows, _ = compare(wl, POLICIES, None, (False, True), half_life)
    base = report.add_ratios(rows)
    print(f"\n## {title}\n")
    print(report.table(rows, base))
    print(report.tenant_table(rows))


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--traces", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "traces")
    )
    ap.add_argument("--half-life", default="7d")
    a = ap.parse_args()
    half = parse_duration(a.half_life, what="--half-life")
    t0 = time.perf_counter()
    wl = merged(a.traces)
    run(f"ITP 01+05+09+10 as four tenants, 8x8 GPUs (load {wl.load:.2f}), half-life {a.half_life}",
        wl, half)  # fmt: skip
    philly = os.path.join(a.traces, "philly_pollux", "philly.csv")
    wl = prepare(philly, inventory="8x8", start_day=27, days=14, load=1.4, scale="thin")
    run(f"Philly VCs as tenants, days 27-41, thinned, 8x8 GPUs (load {wl.load:.2f}), "
        f"half-life {a.half_life}", wl, half)  # fmt: skip
    print(f"total wall time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
