"""openb's ``gpu_spec`` (GPU-model constraints) in the simulator, as FGD's simulator reads it:
``|``-separated alternatives, exact model names, empty = any GPU (berth/sim/gpuspec.py)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from berth.core import GIB
from berth.core.inventory import Gpu, Node
from berth.core.placement import PLACEMENTS
from berth.sim import gpuspec, traces, workload
from berth.sim.engine import simulate
from berth.sim.fill import fill
from berth.sim.run import prepare
from berth.sim.traces import SimJob, parse_gpu_spec

DATA = Path(__file__).parent / "data"
PODS = str(DATA / "openb_gpuspec33_excerpt.csv")  # real rows: see data/SOURCE.md
NODES = str(DATA / "openb_nodes_excerpt.csv")


def test_parse_gpu_spec() -> None:
    assert parse_gpu_spec("") == ()
    assert parse_gpu_spec("T4") == ("T4",)
    assert parse_gpu_spec("V100M16|V100M32") == ("V100M16", "V100M32")
    assert parse_gpu_spec("V100M16|V100M32|V100M32") == ("V100M16", "V100M32")
    assert parse_gpu_spec("|T4||") == ("T4",)
    assert parse_gpu_spec("||") == ()


def test_openb_reader_keeps_gpu_spec_of_gpu_pods() -> None:
    jobs = {j.name: j for j in traces.read(PODS)}
    assert jobs["openb-pod-0009"].gpu_models == ("V100M16", "V100M32")
    assert jobs["openb-pod-0012"].gpu_models == ("T4",)
    assert jobs["openb-pod-0017"].gpu_models == ("G2",) and jobs["openb-pod-0017"].gpus == 8
    assert jobs["openb-pod-0449"].gpu_models == ("A10", "T4")
    assert jobs["openb-pod-0000"].gpu_models == ()  # empty spec: any GPU
    assert jobs["openb-pod-0005"].gpus == 0 and jobs["openb-pod-0005"].gpu_models == ()


def models_of(inv: workload.Inventory) -> dict[int, str]:
    return {g.index: g.name for g in inv[0]}


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_replay_never_puts_a_constrained_pod_on_another_model(placement: str) -> None:
    wl = prepare(PODS, inventory=NODES, time_limits="exact")
    model = models_of(wl.inv)
    constrained = [j for j in wl.jobs if j.gpu_models]
    assert len(constrained) >= 8
    res = simulate(copy.deepcopy(wl.jobs), wl.inv, placement=placement)
    for j, gpus in zip(res.jobs, res.placed, strict=True):
        if j.gpu_models:
            assert gpus, f"{j.name} never started"
            assert {model[g] for g in gpus} <= set(j.gpu_models), (j.name, j.gpu_models, gpus)


def test_exact_model_names_not_substrings() -> None:
    """``A10`` must not match an ``A100``, nor ``V100M16`` a ``V100M32``."""
    nodes = {"a100": Node("a100", 64000.0, 256 * GIB), "a10": Node("a10", 64000.0, 256 * GIB)}
    gpus = [Gpu(i, f"G{i}", "A100", None, True, "a100") for i in range(4)]
    gpus.append(Gpu(4, "G4", "A10", None, True, "a10"))
    pods = [SimJob(1, 0, 1, 0.25, cpu=1000.0, ram=GIB, gpu_models=("A10",))]
    for how in PLACEMENTS:
        r = fill(pods, (gpus, nodes), how, 42, until=130, marks=(100,))
        # 5 GPUs; only GPU 4 (the A10) takes these pods: at most 1 of 5 GPUs allocated
        assert r.placed == 4 and r.unsatisfiable == 0
        assert r.marks[100] <= 20.0 + 1e-9
    idx = gpuspec.ModelIndex(gpus)
    assert idx.ids(("A10",)) == (4,) and idx.ids(("A100",)) == (0, 1, 2, 3)


def test_fill_constrained_pods_only_use_their_model() -> None:
    """Pods that may only run on T4 fill the 2 T4 GPUs and fail elsewhere (without the
    constraint they would fill the G2 node too)."""
    inv = workload.inventory(NODES)
    t4 = sum(1 for g in inv[0] if g.name == "T4")
    pods = [SimJob(1, 0, 1, 1.0, cpu=1000.0, ram=GIB, gpu_models=("T4",))]
    for how in PLACEMENTS:
        r = fill(pods, inv, how, 42, marks=(50, 100))
        assert r.placed == t4 == 2 and r.constrained == r.placed + r.failed
        assert r.unsatisfiable == 0
        free = fill(pods, inv, how, 42, marks=(50, 100), gpu_spec=False)
        assert free.placed > 20  # the old, easier workload


def test_unsatisfiable_spec_is_reported_not_placed() -> None:
    inv = workload.inventory(NODES)
    pods = [
        SimJob(1, 0, 1, 0.5, cpu=1000.0, ram=GIB, gpu_models=("H100",)),  # no such model
        SimJob(2, 0, 1, 4.0, cpu=1000.0, ram=GIB, gpu_models=("T4",)),  # T4 nodes have 2
        SimJob(3, 0, 1, 1.0, cpu=1000.0, ram=GIB),
    ]
    for how in PLACEMENTS:
        r = fill(pods, inv, how, 42, marks=(50, 100))
        assert r.unsatisfiable == r.constrained > 0
        # only the unsatisfiable pods fail; the unconstrained one is placed each time
        assert r.failed == r.unsatisfiable and r.placed >= 1
    bad = gpuspec.resolve(copy.deepcopy(pods), inv[0])
    assert [j.id for j in bad] == [1, 2]
    assert "H100" in gpuspec.describe(bad) and "4 x T4" in gpuspec.describe(bad)


def test_prepare_drops_and_names_unsatisfiable_jobs(tmp_path: Path) -> None:
    pods = tmp_path / "pods.csv"
    rows = Path(PODS).read_text().splitlines()
    rows.append("openb-pod-9999,8000,32768,1,1000,H100|B200,LS,Running,100,200,100")
    rows.append("openb-pod-9998,8000,32768,4,1000,T4,LS,Running,100,200,100")
    pods.write_text("\n".join(rows) + "\n")
    wl = prepare(str(pods), inventory=NODES)
    names = {j.name for j in wl.jobs}
    assert "openb-pod-9999" not in names and "openb-pod-9998" not in names
    assert "openb-pod-0012" in names
    note = next(n for n in wl.notes if "gpu_spec" in n)
    assert "2 jobs" in note and "openb-pod-9999" in note and "H100|B200" in note
    assert wl.dropped >= 2
    res = simulate(wl.jobs, wl.inv, placement="packer")
    assert all(s >= 0 for s in res.start)  # the rest all run


def test_whole_inventory_without_the_model_drops_constrained_jobs() -> None:
    wl = prepare(PODS, inventory="8")  # one host of 8 GPUs named "GPU": no T4, G2, ...
    assert all(not j.gpu_models for j in wl.jobs)
    assert any("gpu_spec" in n for n in wl.notes)


def test_fill_command_reports_unsatisfiable_pods(capsys: pytest.CaptureFixture[str]) -> None:
    from berth.cli.main import main

    rc = main(["simulate", PODS, "--fill", "--inventory", "8", "--placement", "first-fit"])
    assert rc == 0
    out, err = capsys.readouterr()
    assert "first-fit" in out
    assert "gpu_spec" in err and "no node" in err


def test_poisson_draws_keep_the_constraint() -> None:
    wl = prepare(PODS, inventory=NODES, poisson=200, load=0.9, seed=3)
    model = models_of(wl.inv)
    drawn = [j for j in wl.jobs if j.gpu_models]
    assert drawn and all(j.gpu_ids for j in drawn)
    assert all({model[i] for i in j.gpu_ids or ()} <= set(j.gpu_models) for j in drawn)
    res = simulate(wl.jobs, wl.inv, placement="packer")
    for j, gpus in zip(res.jobs, res.placed, strict=True):
        assert not j.gpu_models or {model[g] for g in gpus} <= set(j.gpu_models)
