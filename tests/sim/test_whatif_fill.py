from __future__ import annotations

from berth.core import GIB, Job, Request, State, transition
from berth.core.inventory import Gpu, Node
from berth.sim.fill import fill
from berth.sim.traces import SimJob
from berth.sim.whatif import predict


def gpus(n: int) -> list[Gpu]:
    return [Gpu(i, f"G{i}", "A100", 80 * GIB) for i in range(n)]


def test_predicts_starts_from_time_limits() -> None:
    r = Job(id=1, submit_time=0.0, request=Request(gpus=1), time_limit=100.0)
    transition(r, State.RUNNING, now=0.0, gpus=(0,))
    a = Job(id=2, submit_time=1.0, request=Request(gpus=2), time_limit=50.0)
    b = Job(id=3, submit_time=2.0, request=Request(gpus=1), time_limit=30.0)
    c = Job(id=4, submit_time=3.0, request=Request(gpus=1))  # no limit: inexact after it
    held = Job(id=5, submit_time=4.0, request=Request(gpus=1), held=True)
    before = [j.to_dict() for j in (r, a, b, c, held)]
    p = predict([a, b, c, held], [r], gpus(2), 10.0, policy="fifo-backfill", assume=1000.0)
    assert p[3].start == 10.0 and p[3].gpus == (1,)  # backfills: ends at 40 < 100
    assert p[2].start == 100.0 and p[2].end == 150.0 and p[2].exact
    assert p[4].start == 150.0 and p[4].end == 1150.0 and "no time limit" in p[4].note
    assert p[5].start is None and p[5].note == "held"
    assert [j.to_dict() for j in (r, a, b, c, held)] == before  # the queue is not changed


def test_running_job_without_limit_makes_predictions_inexact() -> None:
    r = Job(id=1, submit_time=0.0, request=Request(gpus=1))
    transition(r, State.RUNNING, now=0.0, gpus=(0,))
    a = Job(id=2, submit_time=1.0, request=Request(gpus=1), time_limit=60.0)
    p = predict([a], [r], gpus(1), 5.0, assume=600.0)
    assert p[2].start == 600.0 and not p[2].exact


def test_fill_allocation_ratio_is_sane() -> None:
    nodes = {f"n{i}": Node(f"n{i}", 64000.0, 256 * GIB) for i in range(4)}
    inv = [Gpu(i, f"G{i}", "T4", None, True, f"n{i // 4}") for i in range(16)]
    pods = [SimJob(1, 0, 1, 0.5, cpu=4000.0, ram=GIB), SimJob(2, 0, 1, 1.0, cpu=8000.0, ram=GIB),
            SimJob(3, 0, 1, 0.25, cpu=2000.0, ram=GIB), SimJob(4, 0, 1, 4.0, cpu=16000.0, ram=GIB)]  # fmt: skip
    for how in ("first-fit", "best-fit", "packer"):
        r = fill(pods, (inv, nodes), how, 42, marks=(50, 100, 130))
        assert 0 < r.marks[50] <= 50.0 + 1e-9
        assert r.marks[50] <= r.marks[100] <= r.marks[130] <= 100.0
        assert r.marks[50] == 50.0 or r.failed > 0


def test_fill_counts_unplaceable_pods_as_arrived_and_goes_on() -> None:
    """FGD's reading (its artifact's SchedulePods and merge_alloc_discrete.py): a pod that
    fits nowhere still adds to the arrived demand and the run continues with the next pod;
    the ratio at a mark is the mean over the pods whose arrived % rounds to it."""
    nodes = {"n0": Node("n0", 8000.0, 64 * GIB)}
    inv = [Gpu(i, f"G{i}", "T4", None, True, "n0") for i in range(4)]
    pods = [SimJob(1, 0, 1, 1.0, cpu=99000.0, ram=GIB),  # never fits: the node has 8 cores
            SimJob(2, 0, 1, 1.0, cpu=1000.0, ram=GIB)]  # fmt: skip
    for how in ("first-fit", "best-fit", "packer"):
        r = fill(pods, (inv, nodes), how, 42, until=200, marks=(100, 200))
        # each pass over the list brings one of each: 4 of 8 arrived pods fail, 4 are placed
        assert (r.failed, r.placed) == (4, 4)
        assert r.marks == {100: 50.0, 200: 100.0}
        assert r.window == {100: 50.0, 200: 100.0}


def test_fill_says_how_full_the_gpus_were_when_the_first_pod_failed() -> None:
    nodes = {"n0": Node("n0", 8000.0, 64 * GIB)}
    inv = [Gpu(i, f"G{i}", "T4", None, True, "n0") for i in range(4)]
    half = [SimJob(1, 0, 1, 0.5, cpu=1000.0, ram=GIB), SimJob(2, 0, 1, 1.0, cpu=1000.0, ram=GIB)]
    for how in ("first-fit", "best-fit", "packer"):
        assert fill(half, (inv, nodes), how, 42, until=100, marks=(100,)).first_fail is None
        r = fill(half, (inv, nodes), how, 42, until=200, marks=(100, 200))
        assert r.failed and r.first_fail is not None and 50.0 <= r.first_fail <= 100.0
        # the pod that failed first found less free than it asked: 1 GPU, so more than 3 taken
        assert r.first_fail > 75.0
