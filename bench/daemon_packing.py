"""The daemon's own placements of mixed fractional queues, beside the simulator's (issue 32.4).

    .venv/bin/python bench/daemon_packing.py [--mixes 20] [--gpus 8] [--load 1.2] [--seed 1]
        [--list gpushare40]

Each mix: GPU sizes drawn from one of Alibaba openb's pod lists (its pods of one GPU or
less; ``gpushare40``: 40% of the GPU pods share a GPU, 0.05-0.95 of one), enough for ``--load`` x the GPUs, queued at once on a
real daemon (``berth daemon --foreground``, ``--gpus`` logical 80 GiB GPUs, the default
policy and placement: the packer) while every GPU is paused, then resumed. What its first
pass started (each job's GPUs) is compared with ``berth simulate``'s first pass on the same
queue (:func:`berth.sim.engine.simulate`, all jobs submitted at 0), and the GPU share each
allocates is printed beside the simulator's best-fit and first-fit on the same queue. The
daemon and the simulator share one core (``berth.core.schedule``, the packer, its demand
profile of the queue): every mix should match.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from daemon_bench import Daemon  # noqa: E402

from berth.sim.engine import simulate  # noqa: E402
from berth.sim.traces import SimJob  # noqa: E402
from berth.sim.workload import inventory  # noqa: E402

TRACES = os.path.join(ROOT, "..", "shared", "traces", "alibaba_openb_2023")
RUN = 3600.0  # no job ends while a mix is read


def sizes(path: str) -> list[float]:
    """The GPU sizes of the pod list's pods of at most one GPU."""
    out = []
    with open(path, encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            n, milli = int(r["num_gpu"]), int(r["gpu_milli"])
            if n == 1:
                out.append(round(milli / 1000, 3))
    return out


def mix(pool: list[float], gpus: int, load: float, rng: random.Random) -> list[float]:
    out: list[float] = []
    while sum(out) < load * gpus:
        out.append(rng.choice(pool))
    return out


def simulated(queue: list[float], gpus: int, placement: str) -> dict[str, list[int]]:
    jobs = [SimJob(i, 0.0, RUN, g, time_limit=RUN, name=f"j{i}") for i, g in enumerate(queue, 1)]
    res = simulate(jobs, inventory(f"{gpus}:80G"), placement=placement)
    return {j.name: list(res.placed[i]) for i, j in enumerate(res.jobs) if res.start[i] == 0.0}


def on_daemon(queue: list[float], gpus: int) -> dict[str, list[int]]:
    """The daemon's first pass over ``queue``: each started job's GPUs."""
    d = Daemon(gpus)
    try:
        every = [str(g) for g in range(gpus)]
        d.call("pause", gpus=every)
        names = {}
        for i, g in enumerate(queue, 1):
            spec = d.job(["sleep", str(int(RUN))], name=f"j{i}", gpus=g, time_limit=RUN)
            names[int(d.call("submit", job=spec)["job_id"])] = f"j{i}"
        d.call("resume", gpus=every)
        deadline = time.monotonic() + 30
        last: dict[int, str] = {}
        settled = 0
        while time.monotonic() < deadline:  # until the running set holds for 20 polls
            rows = d.call("queue", all=True)["jobs"]
            up = {r["id"]: r["state"] for r in rows if r["state"] == "RUNNING"}
            waiting = [r for r in rows if r["state"] == "PENDING" and not r.get("reason")]
            settled = settled + 1 if up == last and up and not waiting else 0
            if settled >= 20:
                break
            last = up
            time.sleep(0.05)
        return {names[i]: d.call("show", job_id=i)["job"]["attempts"][0]["gpus"] for i in last}
    finally:
        ids = [r["id"] for r in d.call("queue")["jobs"]]
        if ids:
            d.call("cancel", job_ids=ids)
        d.stop()


def share(queue: list[float], placed: dict[str, list[int]]) -> float:
    return sum(queue[int(n[1:]) - 1] for n in placed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mixes", type=int, default=20)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--load", type=float, default=1.2, help="GPUs asked per GPU, per mix")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--list", default="gpushare40", help="openb_pod_list_<LIST>.csv")
    ap.add_argument("--traces", default=TRACES, help="the folder of openb's pod lists")
    a = ap.parse_args()
    pool = sizes(os.path.join(a.traces, f"openb_pod_list_{a.list}.csv"))
    rng = random.Random(a.seed)
    print("mix  jobs  asked  daemon  sim-packer  same  sim-best-fit  sim-first-fit")
    tot = {"daemon": 0.0, "packer": 0.0, "best-fit": 0.0, "first-fit": 0.0}
    same = 0
    for m in range(1, a.mixes + 1):
        queue = mix(pool, a.gpus, a.load, rng)
        got = on_daemon(queue, a.gpus)
        sim = {how: simulated(queue, a.gpus, how) for how in ("packer", "best-fit", "first-fit")}
        row = {"daemon": share(queue, got), **{h: share(queue, p) for h, p in sim.items()}}
        for k, v in row.items():
            tot[k] += v
        same += got == sim["packer"]
        print(
            f"{m:3d}  {len(queue):4d}  {sum(queue):5.2f}  {row['daemon']:6.2f}  "
            f"{row['packer']:10.2f}  {'yes' if got == sim['packer'] else 'NO':>4}  "
            f"{row['best-fit']:12.2f}  {row['first-fit']:13.2f}"
        )
        sys.stdout.flush()
    n = a.mixes
    print(
        f"mean GPUs allocated of {a.gpus}: daemon {tot['daemon'] / n:.3f}, simulator: packer "
        f"{tot['packer'] / n:.3f}, best-fit {tot['best-fit'] / n:.3f}, first-fit "
        f"{tot['first-fit'] / n:.3f}; the daemon placed as the simulator on {same} of {n} mixes"
    )
    return 0 if same == n else 1


if __name__ == "__main__":
    sys.exit(main())
