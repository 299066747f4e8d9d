"""Fractional-GPU packing on Alibaba's openb pods (issue 5's bench, part 2).

    .venv/bin/python bench/sim_openb.py [--traces ../shared/traces] [--seeds 42-51] [--jobs 5000]

1. openb default pod shapes and lifetimes (capped at 7 days), Poisson arrivals at offered
   load 0.9 and 1.2 on one 8-GPU node (80 GiB GPUs; a fraction is charged its share of
   memory), default policy, placements first-fit / best-fit / packer: JCT, time-averaged GPU
   allocation and fragmentation while jobs wait.
2. The FGD experiment (ANCHORS.md A1): the full openb node list (1,213 nodes, 6,212 GPUs, with
   CPU and RAM), pods drawn from openb_pod_list_default until 130% of GPU capacity has
   arrived, no departures; GPU allocation ratio at 100% (and 130%) arrived demand, mean over
   the seeds, against FGD's published 95.23% (BestFit 92.86%). As in FGD's artifact, pods
   that cannot be placed count as arrived and are skipped, and the ratio at a mark is the mean
   over the pods whose arrived % rounds to it (``FillResult.window``).
3. The same on the ``gpuspec*`` pod lists (``--workloads``): the default pods with GPU-model
   constraints (``gpu_spec``) on 10-33% of them, honoured as FGD's simulator does
   (berth/sim/gpuspec.py). Those lists differ from ``default`` only in ``gpu_spec`` (checked
   here), so the ``default`` rows of the same run are the "gpu_spec ignored" baseline.
   The paper's numbers come from ``anchors/fgd_atc23_alloc_ratio_summary.csv``.
4. The same on the ``multigpu*`` pod lists: more multi-GPU pods (2, 4 and 8 GPUs). These
   lists have no time columns (pod shapes only), which is all the fill experiment needs.
5. The same on the ``cpu*`` (more CPU-only pods) and ``gpushare*`` (more fractional pods)
   lists: by default every one of the 17 pod lists FGD's paper has numbers for.

Each row also says when the first pod failed: the GPU allocated (%) at that moment, mean
over the seeds (and the earliest). ``vs FGD``: the row's mean at 100% less the paper's FGD.
``packer-flat`` is the packer without the weight on scarce capabilities
(``berth.core.scarcity.WEIGHTED = False``), i.e. the packer before issue 32.4;
``packer-nodes`` counts a scarce shape's hosts as nodes (``scarcity.BY_GPUS = False``), as
before its free GPUs; ``packer-w6`` weighs the demand's sizes by GPUs asked and leaves the
CPU-only demand out of the CPU per GPU (``profile.BY_COUNT = CPU_BINDS = False``), the
packer before their change; ``packer-w7`` weighs the CPU/RAM asks by GPUs asked
everywhere (``asks.TAILS_BY_COUNT = False``), the packer before they counted by job where
cores are roomy. ``--profile recent``: the packer's demand from the last arrivals instead
of the whole pod list (FGD's typical pods). ``--plain`` scores every node instead of one of
each class of alike nodes, ``--digests`` prints a hash of each seed's placements: the two
must print the same digests.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time

from berth.core import asks, scarcity
from berth.core import profile as demand_profile
from berth.sim import report, traces, workload
from berth.sim.fill import fill
from berth.sim.run import compare, prepare

PAPER = {"best-fit": "05-BestFit", "packer": "06-FGD"}  # whose published numbers to show
FGD = "06-FGD"
LISTS = (
    "default,gpuspec10,gpuspec20,gpuspec25,gpuspec33,multigpu20,multigpu30,multigpu40,"
    "multigpu50,cpu050,cpu100,cpu200,cpu250,gpushare40,gpushare60,gpushare80,gpushare100"
)
# ``packer-plain``: the packer with FGD's own NoAccess term (the share of demand that may not
# use a GPU), without berth's weighting by supply (berth.core.profile.SUPPLY_WEIGHTED)


def anchors(traces_dir: str) -> dict[tuple[str, str], dict[int, float]]:
    """(workload, policy) -> {90|100|130: GPU allocated %}, FGD's seed means (ANCHORS.md A1)."""
    path = os.path.join(traces_dir, "anchors", "fgd_atc23_alloc_ratio_summary.csv")
    out: dict[tuple[str, str], dict[int, float]] = {}
    with open(path, encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            out[(r["workload"].removeprefix("openb_pod_list_"), r["policy"])] = {
                m: float(r[f"gpu_alloc_pct_at_{m}pct_arrived"]) for m in (90, 100, 130)
            }
    return out


def same_but_spec(a: list[traces.SimJob], b: list[traces.SimJob]) -> bool:
    """Whether two pod lists differ only in their GPU-model constraints."""

    def key(j: traces.SimJob) -> tuple[object, ...]:
        return (j.name, j.submit, j.duration, j.gpus, j.cpu, j.ram, j.tenant)

    return len(a) == len(b) and all(key(x) == key(y) for x, y in zip(a, b, strict=True))


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--traces", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "traces")
    )
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--skip-jct", action="store_true")
    ap.add_argument(
        "--placements",
        default="first-fit,best-fit,packer",
        help="also packer-plain: the packer with FGD's unweighted NoAccess term; packer-flat: "
        "without the weight on scarce capabilities; packer-nodes: scarce shapes' hosts counted "
        "as nodes; packer-w6: the size distribution by GPUs asked and the CPU per GPU without "
        "CPU-only demand (the packer before issue 32.4's third pass); packer-w7: the CPU/RAM asks by "
        "GPUs asked everywhere (before they counted by job where cores are roomy)",
    )
    ap.add_argument(
        "--workloads",
        default=LISTS,
        help="openb pod lists for the FGD experiment (openb_pod_list_<name>.csv)",
    )
    ap.add_argument("--per-seed", action="store_true", help="print each seed's value at 100%%")
    ap.add_argument(
        "--digests", action="store_true",
        help="print each seed's digest of every placement (to compare two codes' decisions)",
    )  # fmt: skip
    ap.add_argument(
        "--plain", action="store_true",
        help="score every node (no classes of alike nodes): the slow scan, same decisions",
    )  # fmt: skip
    ap.add_argument(
        "--profile", default="list", choices=("list", "recent"),
        help="the packer's demand profile: the whole pod list (as FGD's) or the last arrivals",
    )  # fmt: skip
    ap.add_argument(
        "--until", type=int, default=130, choices=(100, 130),
        help="stop at 100%% arrived (no @130 column) to save a quarter of the time",
    )  # fmt: skip
    a = ap.parse_args()
    ob = os.path.join(a.traces, "alibaba_openb_2023")
    pods_path = os.path.join(ob, "openb_pod_list_default.csv")
    if not a.skip_jct:
        rows = []
        for load in (0.9, 1.2):
            wl = prepare(
                pods_path, inventory="8", poisson=a.jobs, load=load, seed=1, time_limits="exact"
            )
            r, _ = compare(wl, ["balanced"], ["first-fit", "best-fit", "packer"])
            rows += r
        base = report.add_ratios(rows)
        print(f"\n## openb default pods, Poisson arrivals, one 8-GPU node ({a.jobs} jobs)\n")
        print(report.table(rows, base).replace(f"x{base}", "xfirst-fit"))
    lo, _, hi = a.seeds.partition("-")
    seeds = list(range(int(lo), int(hi or lo) + 1))
    inv = workload.inventory(os.path.join(ob, "openb_node_list_gpu_node.csv"))
    paper = anchors(a.traces)
    default = traces.read(pods_path)
    for wl in a.workloads.split(","):
        pods = traces.read(os.path.join(ob, f"openb_pod_list_{wl}.csv"))
        n_spec = sum(1 for p in pods if p.gpu_models)
        print(
            f"\n## FGD experiment, {wl}: {len(inv[0])} GPUs on {len(inv[1])} nodes, seeds "
            f"{seeds[0]}-{seeds[-1]}; {n_spec} of {len(pods)} pods constrain the GPU model"
            + ("" if not wl.startswith("gpuspec") else
               f" (else same as default: {same_but_spec(pods, default)})")
            + "\n"
        )  # fmt: skip
        print(
            "placement   alloc% @90   @100   @130   (min-max @100)   (min-max @130)"
            "   constrained/unsatisfiable/failed pods per seed   paper @90/@100/@130"
            "   vs FGD @100   1st fail % (earliest)   wall s"
        )
        for how in a.placements.split(","):
            t0 = time.perf_counter()
            demand_profile.SUPPLY_WEIGHTED = how != "packer-plain"
            scarcity.WEIGHTED = how != "packer-flat"
            scarcity.BY_GPUS = how != "packer-nodes"
            demand_profile.BY_COUNT = demand_profile.CPU_BINDS = how != "packer-w6"
            asks.TAILS_BY_COUNT = how not in ("packer-w6", "packer-w7")
            place_how = "packer" if how.startswith("packer") else how
            marks = (90, 100, 130) if a.until == 130 else (90, 100)
            runs = [
                fill(
                    pods, inv, place_how, s, until=a.until, marks=marks,
                    classes=not a.plain, profile=a.profile,
                )
                for s in seeds
            ]  # fmt: skip
            m = {k: sum(r.window[k] for r in runs) / len(runs) for k in marks}
            m.setdefault(130, float("nan"))
            at100 = [r.window[100] for r in runs]
            at130 = [r.window.get(130, float("nan")) for r in runs]
            ref = paper.get((wl, PAPER.get(how, "")))
            pub = (
                "-"
                if ref is None
                else f"{PAPER[how][3:]} " + "/".join(f"{ref[k]:.2f}" for k in (90, 100, 130))
            )
            counts = "/".join(
                f"{sum(getattr(r, c) for r in runs) / len(runs):.0f}"
                for c in ("constrained", "unsatisfiable", "failed")
            )
            fgd = paper.get((wl, FGD))
            vs = "-" if fgd is None else f"{m[100] - fgd[100]:+.2f}"
            # (a run with no failed pod counts as failing at its end: 100% allocated is the cap)
            ff = [100.0 if r.first_fail is None else r.first_fail for r in runs]
            print(
                f"{how:<12} {m[90]:10.2f} {m[100]:6.2f} {m[130]:6.2f}   "
                f"({min(at100):.2f}-{max(at100):.2f})   ({min(at130):.2f}-{max(at130):.2f})"
                f"   {counts:>20}   {pub:>28}   {vs:>11}"
                f"   {sum(ff) / len(ff):8.1f} ({min(ff):5.1f})   {time.perf_counter() - t0:6.0f}"
            )
            if a.per_seed:
                print("   per seed @100: " + " ".join(f"{v:.2f}" for v in at100))
                print("   1st fail %:    " + " ".join(f"{v:.1f}" for v in ff))
            if a.digests:
                print("   digests: " + " ".join(f"{r.seed}:{r.digest}" for r in runs))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
