"""FGD (ATC'23) as a reference, beside berth's packer, pod by pod (issue 32.4's gaps).

    .venv/bin/python bench/fgd_ref.py --workload multigpu40 --seed 42 [--drive fgd|packer]

FGD's fragmentation measure (Weng et al., ATC'23, section 4): for a node n and a typical pod
m, ``F_n(m)`` is all the node's free GPU share when m cannot run there (too few whole free
GPUs, no GPU with m's share free, CPU or RAM short, or m asks no GPU: FGD's x-axis), else the
free share of the GPUs m could not use (for a whole-GPU pod: the partly used GPUs; for a share
``s``: the GPUs with less than ``s`` free). ``F_n = sum_m p_m F_n(m)`` over the typical pods,
``p_m`` their share by *count* of the pod list (FGD's popularity; every shape kept). A pod
goes where ``F_n`` rises least (within a node: the GPU(s) that raise it least); ties at random
(kube-scheduler picks among equal scores at random). No GPU models (the lists compared here
have none).

The fill loop is berth's (:mod:`berth.sim.fill`: the same arrival order and the same reading
of the allocation ratio at a mark), driven by FGD (``--drive fgd``) or by berth's packer
(``--drive packer``); at every pod the other one is asked too, on the same state, and the
pods where they choose a different *kind* of node (model, GPUs, cores, RAM, free GPUs, CPU
and RAM left) are tallied: what each spent.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import sys

from berth.core.capacity import Capacity
from berth.core.nodeclasses import NodeClasses
from berth.core.placement import Placement, place
from berth.sim import traces, workload
from berth.sim.fill import _arrivals, _Demand, _request, _take
from berth.sim.gpuspec import ModelIndex

Shape = tuple[int, int, float, float]  # whole GPUs k (0: a share or none), share milli, cpu, ram
State = tuple[float, float, tuple[int, ...]]  # cpu left, ram left, GPU milli free (sorted)


class Fgd:
    def __init__(self, pods: list[traces.SimJob], cap: Capacity, seed: int) -> None:
        count: collections.Counter[Shape] = collections.Counter()
        for p in pods:
            count[_shape(p.gpus, p.cpu or 0.0, float(p.ram or 0))] += 1
        n = sum(count.values())
        self.typical = [(m, c / n) for m, c in count.items()]
        self.memo: dict[State, float] = {}
        self.cap = cap
        self.rng = random.Random(seed * 7919 + 1)

    def state(self, n: int) -> State:
        c = self.cap
        frees = tuple(sorted(round(c.free[p] * 1000) for p in c.node_pos[n]))
        return (c.node_cpu[n], c.node_ram[n], frees)

    def frag(self, st: State) -> float:
        v = self.memo.get(st)
        if v is not None:
            return v
        cpu, ram, frees = st
        total = sum(frees)
        full = sum(1 for f in frees if f >= 1000)
        v = 0.0
        for (k, s, mc, mr), pm in self.typical:
            if (k == 0 and s == 0) or cpu < mc - 1e-6 or ram < mr:
                v += pm * total
            elif k:
                v += pm * (total if full < k else sum(f for f in frees if f < 1000))
            else:
                if not any(f >= s for f in frees):
                    v += pm * total
                else:
                    v += pm * sum(f for f in frees if f < s)
        self.memo[st] = v
        return v

    def choose(self, pod: traces.SimJob) -> Placement | None:
        c = self.cap
        k, s, mc, mr = _shape(pod.gpus, pod.cpu or 0.0, float(pod.ram or 0))
        best: tuple[float, float] | None = None
        out: Placement | None = None
        for n, ps in enumerate(c.node_pos):
            if not ps or c.node_cpu[n] < mc - 1e-6 or c.node_ram[n] < mr:
                continue
            st = self.state(n)
            cpu, ram, frees = st
            before = self.frag(st)
            opts: list[tuple[tuple[int, ...], tuple[int, ...]]] = []  # new frees, positions
            if k:
                whole = [p for p in ps if c.free[p] >= 1.0 - 1e-9 and not c.busy[p]]
                if len(whole) < k:
                    continue
                lst = list(frees)
                for _ in range(k):
                    lst.remove(1000)
                    lst.append(0)
                opts.append((tuple(sorted(lst)), tuple(whole[:k])))
            elif s:
                seen: set[int] = set()
                for p in ps:
                    f = round(c.free[p] * 1000)
                    if f >= s and f not in seen:
                        seen.add(f)
                        lst = list(frees)
                        lst.remove(f)
                        lst.append(f - s)
                        opts.append((tuple(sorted(lst)), (p,)))
                if not opts:
                    continue
            else:
                opts.append((frees, ()))
            for nf, pos in opts:
                d = self.frag((cpu - mc, ram - mr, nf)) - before
                key = (round(d, 6), self.rng.random())
                if best is None or key < best:
                    best, out = key, Placement(pos, n, None)
        return out


def _shape(g: float, cpu: float, ram: float) -> Shape:
    if g >= 1.0:
        return (round(g), 1000, cpu, ram)
    return (0, round(g * 1000), cpu, ram)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "shared", "traces"))  # fmt: skip
    ap.add_argument("--workload", default="multigpu40")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--drive", default="fgd", choices=("fgd", "packer"))
    ap.add_argument("--until", type=float, default=100.5)
    ap.add_argument("--show", type=int, default=25, help="first disagreements to print")
    ap.add_argument("--alone", action="store_true", help="FGD only: no shadow packer, no tally")
    a = ap.parse_args()
    ob = os.path.join(a.traces, "alibaba_openb_2023")
    inv = workload.inventory(os.path.join(ob, "openb_node_list_gpu_node.csv"))
    pods = traces.read(os.path.join(ob, f"openb_pod_list_{a.workload}.csv"))
    gpus, nodes = inv
    models = ModelIndex(gpus)
    cap = Capacity(gpus, nodes)
    node_model = {}
    for g in gpus:
        node_model[g.node] = g.name
    model_of = [node_model.get(nm, "-") for nm in cap.node_names]
    alike = NodeClasses(cap)
    demand = _Demand(pods, models, True, alike)
    fgd = Fgd(pods, cap, a.seed)
    rng = random.Random(a.seed)
    total = float(len(gpus))
    arrived = allocated = 0.0
    win = [0.0, 0.0]
    first_fail = None
    tally: collections.Counter[str] = collections.Counter()
    cpu_only: collections.Counter[str] = collections.Counter()  # by the node's free GPUs
    cores: collections.Counter[str] = collections.Counter()
    fails: collections.Counter[str] = collections.Counter()  # failed pods by shape
    shown = 0
    agree = differ = 0
    for i, pod in enumerate(_arrivals(pods, rng)):
        if arrived + pod.gpus > a.until / 100.0 * total:
            break
        req, _, _ = _request(pod, models, True)
        demand.arrive(req)
        arrived += pod.gpus
        fg = fgd.choose(pod)
        pk = fg if a.alone else place(cap, req, "packer", demand.profile, classes=alike)

        def desc(pl: Placement | None) -> str:
            if pl is None:
                return "FAIL"
            n = pl.node
            ps = cap.node_pos[n]
            free = sum(cap.free[p] for p in ps)
            return (
                f"{model_of[n]}x{len(ps)} ({cap.node_cpu[n] / 1000:.0f}c "
                f"{cap.node_ram[n] / 2**30:.0f}G {free:.2f}g left, whole {cap.node_whole[n]})"
            )

        dp, df = desc(pk), desc(fg)
        if dp == df:
            agree += 1
        else:
            differ += 1
            shape = f"{pod.gpus:g}g/{(pod.cpu or 0) / 1000:g}c/{(pod.ram or 0) / 2**30:.0f}G"
            tally[f"{shape}: packer {dp.split(' (')[0]} / fgd {df.split(' (')[0]}"] += 1
            if shown < a.show:
                shown += 1
                print(f"pod {i} @{100 * allocated / total:.1f}% {shape}\n   packer {dp}\n"
                      f"   fgd    {df}")  # fmt: skip
        pl = fg if a.drive == "fgd" else pk
        if pl is not None and not pod.gpus:
            free = sum(cap.free[p] for p in cap.node_pos[pl.node])
            band = "0" if free < 1e-6 else "<1" if free < 1 - 1e-6 else ">=1"
            cpu_only[band] += 1
            cores[band] += (pod.cpu or 0.0) / 1000
        if pl is None:
            fails[f"{pod.gpus:g}g/{(pod.cpu or 0) / 1000:g}c"] += 1
            if first_fail is None:
                first_fail = 100.0 * allocated / total
        else:
            _take(cap, alike, req, pl)
            allocated += pod.gpus
        if round(100.0 * arrived / total) == 100:
            win[0] += 100.0 * allocated / total
            win[1] += 1
    print(f"\n{a.workload} seed {a.seed}, driven by {a.drive}: allocated {100 * allocated / total:.2f}%"
          f" at {100 * arrived / total:.1f}% arrived; window@100 "
          f"{win[0] / win[1] if win[1] else float('nan'):.2f}; first failure "
          f"{first_fail}; same kind of node {agree}, different {differ}")  # fmt: skip
    print(
        "CPU-only pods placed, by the GPU share the node had free: "
        + ", ".join(f"{b}: {cpu_only[b]} pods, {cores[b]:.0f} cores" for b in ("0", "<1", ">=1"))
    )
    print("failed pods: " + ", ".join(f"{k} {v}" for k, v in fails.most_common(12)))
    for k, v in tally.most_common(30):
        print(f"{v:6d}  {k}")
    # where the free GPU share sits at the end, by node kind and CPU left
    left: collections.Counter[str] = collections.Counter()
    for n, ps in enumerate(cap.node_pos):
        free = sum(cap.free[p] for p in ps)
        if free > 1e-6:
            cpu = cap.node_cpu[n] / 1000
            band = "<4c" if cpu < 4 else "<8c" if cpu < 8 else "<16c" if cpu < 16 else ">=16c"
            left[f"{model_of[n]}x{len(ps)} {band}"] += round(free, 2)
    slivers: collections.Counter[float] = collections.Counter()
    for f in cap.free:
        if 1e-6 < f < 1.0 - 1e-6:
            slivers[round(f, 2)] += 1
    print(
        "partly used GPUs at the end, by free share (share: GPUs): "
        + ", ".join(f"{k:.2f}: {v}" for k, v in sorted(slivers.items()))
    )
    print("free GPU share at the end, by node kind and cores left:")
    for k, v in sorted(left.items(), key=lambda kv: -kv[1]):
        print(f"   {v:8.2f}  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
