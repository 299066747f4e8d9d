"""How good the start estimates are (issue 33.5): on a replayed history, the error of each
job's estimate made when it is submitted, with and without learned run times.

    .venv/bin/python bench/estimates.py [--traces ../shared/traces] [--quick] [--vcs 103959,...]

The history: bench/sim_predict.py's workload (Philly jobs of a VC, with recurring names, one
in four with a typed time limit), replayed by the simulator under the default policy. At each
job's submit the daemon's estimator is run as the daemon runs it
(:func:`berth.sim.whatif.predict` over the queue's first 300 jobs and the running ones, a job
without a limit or a prediction never ending): once with time limits only, once with the run
times learned from the jobs ended so far (:mod:`berth.core.runtimes`, a VC's jobs by name,
the daemon's rules). Each estimate is compared with when the job really started: median and
p90 of |estimated - actual start| over the jobs that got one, and how many got "unknown"; and
the learned estimates' errors on the jobs the limits could estimate too (the same jobs).
"""

from __future__ import annotations

import argparse
import heapq
import os
import sys

from sim_predict import VCS, vc_jobs

from berth.core.policy import DEFAULT_PLACEMENT, DEFAULT_POLICY, order_key
from berth.core.runtimes import Run, RunTimes, shape_of
from berth.sim import workload
from berth.sim.engine import _Replay
from berth.sim.metrics import pct
from berth.sim.traces import SimJob
from berth.sim.whatif import predict

MOST = 300  # the daemon's estimates.MOST


def replay(jobs: list[SimJob], gpus: int) -> dict[str, dict[int, float | None]]:
    """Each job's estimate at submit, by mode ("limits", "learned"), and the real starts
    ("actual")."""
    inv = workload.inventory(str(gpus))
    sim = _Replay(jobs, inv, DEFAULT_POLICY, DEFAULT_PLACEMENT, None)
    learned = RunTimes()
    out: dict[str, dict[int, float | None]] = {"limits": {}, "learned": {}}
    n = len(jobs)
    while sim.arrived < n or sim.ends:
        now = sim.next_event()
        for _, jid in [e for e in sim.ends if e[0] <= now]:  # (learned as they end)
            job = sim.running[jid]
            sj = jobs[sim.pos[jid]]
            if sj.time_limit is None or sj.duration <= sj.time_limit:
                learned.add(Run(job.tenant, job.name, *shape_of(job), now - job.attempts[-1].start))
        sim.end(now)
        before = sim.arrived
        sim.arrive(now)
        new = [jobs[i].id for i in range(before, sim.arrived)]
        if new:
            _estimate(sim, learned, now, new, out)
        d = sim.decide(now)
        sim.start(d, now)
    out["actual"] = {j.id: sim.res.start[i] for i, j in enumerate(jobs)}
    return out


def _estimate(
    sim: _Replay, learned: RunTimes, now: float, new: list[int],
    out: dict[str, dict[int, float | None]],
) -> None:  # fmt: skip
    pending = heapq.nsmallest(MOST, sim.waiting.values(),
                              key=lambda j: order_key(j, DEFAULT_POLICY, now))  # fmt: skip
    running = list(sim.running.values())
    for mode in ("limits", "learned"):
        durations: dict[int, float] = {}
        if mode == "learned":
            for j in running:
                rt = learned.predict(j, j.tenant)
                if rt is not None:
                    durations[j.id] = rt.remaining(now - j.attempts[-1].start, j.time_limit)[0]
            for j in pending:
                rt = learned.predict(j, j.tenant)
                if rt is not None:
                    durations[j.id] = rt.typical
        preds = predict(pending, running, sim.gpus, now, policy=DEFAULT_POLICY, assume=None,
                        durations=durations)  # fmt: skip
        for jid in new:
            p = preds.get(jid)
            out[mode][jid] = None if p is None else p.start


def summary(est: dict[int, float | None], actual: dict[int, float]) -> str:
    errors = [abs(s - actual[j]) / 60 for j, s in est.items() if s is not None]
    unknown = sum(1 for s in est.values() if s is None)
    if not errors:
        return f"- | - | {unknown} of {len(est)}"
    return (f"{pct(errors, 50):.0f} | {pct(errors, 90):.0f} | "
            f"{unknown} of {len(est)} ({100 * unknown / len(est):.0f}%)")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--traces", default=os.path.join(here, "..", "..", "shared", "traces"))
    ap.add_argument("--rho", type=float, default=0.9)
    ap.add_argument("--quick", action="store_true", help="400 jobs per VC")
    ap.add_argument("--vcs", default=",".join(vc for vc, _ in VCS), help="which VCs (a list)")
    args = ap.parse_args()
    want = args.vcs.split(",")
    path = os.path.join(args.traces, "philly_pollux", "philly.csv")
    print(f"policy {DEFAULT_POLICY}, load {args.rho:g}; |estimated - actual start| in minutes\n")
    print("| VC | GPUs | jobs | estimates | median | p90 | unknown |")
    print("|---|---|---|---|---|---|---|")
    for vc, gpus in VCS:
        if vc not in want:
            continue
        jobs = vc_jobs(path, vc, gpus, args.rho, args.quick)
        got = replay(jobs, gpus)
        actual = {j: float(s) for j, s in got["actual"].items() if s is not None}
        for mode in ("limits", "learned"):
            print(f"| {vc} | {gpus} | {len(jobs)} | {mode} | {summary(got[mode], actual)} |")
        known = {j for j, s in got["limits"].items() if s is not None}
        same = {j: s for j, s in got["learned"].items() if j in known}
        print(f"| {vc} | {gpus} | {len(jobs)} | learned, on the jobs limits told "
              f"| {summary(same, actual)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
