"""The daemon's capacity kept between passes (berth/daemon/engine/kept.py) is, after every
change a pass can see, bit for bit the one the core would build afresh: jobs ending anywhere
in the list, new ones, another attempt of the same job, a list in another order, fractional
shares and memory, CPU-only jobs on the CPU slots, outside holders, paused GPUs, a new
inventory read. (Decisions are the core's on either: tests/sim/test_packing_daemon.py.)"""

from __future__ import annotations

import random

from berth.core import GIB, Gpu, Job, Request
from berth.core.capacity import Capacity
from berth.core.inventory import Node, Usage
from berth.core.states import State
from berth.core.transition import transition
from berth.daemon.engine.kept import KeptCapacity

FIELDS = ("free", "mem_free", "node_cpu", "node_ram", "node_whole", "n_whole_free", "busy",
          "usable", "paused", "index", "pos", "mem_total")  # fmt: skip


def _fresh(
    gpus: list[Gpu], nodes: dict[str, Node], others: dict[int, Usage], paused: set[int],
    running: list[Job],
) -> Capacity:  # fmt: skip
    cap = Capacity(gpus, nodes, others, paused)
    for j in running:
        a = j.attempt
        assert a is not None
        cap.take_gpus(a.gpus, a.share, a.mem, a.node, j.request.cpu, j.request.ram)
    return cap


def _start(i: int, share: float, g: int | None, rng: random.Random) -> Job:
    if g is None:  # a CPU-only job (-g 0): one CPU slot
        job = Job(id=i, submit_time=float(i), request=Request(gpus=0, cpu=1000.0))
        transition(job, State.RUNNING, now=float(i), gpus=())
        return job
    mem = rng.choice((None, None, 3 * GIB, 17 * GIB))
    job = Job(id=i, submit_time=float(i), request=Request(gpus=share, mem=mem))
    transition(job, State.RUNNING, now=float(i), gpus=(g,), share=share, mem=mem)
    return job


def test_the_kept_capacity_is_the_fresh_one_after_every_change() -> None:
    rng = random.Random(35)
    gpus = [Gpu(i, f"GPU-{i}", "A100", 80 * GIB) for i in range(4)]
    nodes = {"": Node("", cpu=8000.0)}
    others: dict[int, Usage] = {}
    paused: set[int] = set()
    kept = KeptCapacity()
    running: list[Job] = []
    for i in range(1, 1500):
        roll = rng.random()
        if running and roll < 0.35:
            job = running.pop(rng.randrange(len(running)))
            transition(job, State.COMPLETED, now=float(i), exit_code=0)
        elif running and roll < 0.40:  # (another attempt of one: requeued, started again)
            job = running[rng.randrange(len(running))]
            a = job.attempt
            assert a is not None
            transition(job, State.PREEMPTED, now=float(i), reason="requeue")
            transition(job, State.RUNNING, now=float(i), gpus=a.gpus, share=a.share, mem=a.mem)
        elif running and roll < 0.43:  # (listed in another order)
            rng.shuffle(running)
        elif roll < 0.46:
            others = rng.choice(({}, {1: Usage(0.25, GIB, False, "claim by bob")},
                                 {2: Usage(0.0, 0, True, "a process outside berth")}))  # fmt: skip
        elif roll < 0.48:
            paused = rng.choice((set(), {0}, {3}))
        elif roll < 0.49:
            gpus = list(gpus)  # (a new read of the same GPUs)
            if rng.random() < 0.3:
                gpus[1] = Gpu(1, "GPU-1", "A100", 80 * GIB, healthy=not gpus[1].healthy)
        else:
            share = rng.choice((1.0, 0.1, 0.2, 0.3, 0.47, 0.33, 0.01))
            g = rng.choice((None, 0, 1, 2, 3))
            fresh = _fresh(gpus, nodes, others, paused, running)
            if g is not None and fresh.free[g] < share:
                continue
            running.append(_start(i, share, g, rng))
        got = kept.capacity(gpus, nodes, others, paused, running)
        want = _fresh(gpus, nodes, others, paused, running)
        for name in FIELDS:
            assert getattr(got, name) == getattr(want, name), (i, name)
    assert kept.builds < 200  # (kept between passes: built again only when its inputs change)


def test_a_copy_changed_by_a_pass_leaves_the_kept_one_as_it_was() -> None:
    gpus = [Gpu(i, f"GPU-{i}", "A100", 80 * GIB) for i in range(2)]
    nodes = {"": Node("", cpu=2000.0)}
    rng = random.Random(1)
    running = [_start(1, 0.5, 0, rng)]
    kept = KeptCapacity()
    first = kept.capacity(gpus, nodes, {}, set(), running)
    first.take([1], 1.0, None, 0, 1000.0, None)  # (what a pass's start does to its copy)
    again = kept.capacity(gpus, nodes, {}, set(), running)
    want = _fresh(gpus, nodes, {}, set(), running)
    for name in FIELDS:
        assert getattr(again, name) == getattr(want, name), name
    assert kept.builds == 1


def test_a_copy_has_every_field_of_the_capacity() -> None:
    cap = Capacity([Gpu(0, "GPU-0", "A100", 80 * GIB)], {"": Node("", cpu=1000.0)})
    copy = cap.copy()
    assert all(getattr(copy, name) == getattr(cap, name) for name in Capacity.__slots__)


def test_a_start_withdrawn_then_made_again_elsewhere_is_charged_where_it_runs() -> None:
    """A start withdrawn (its commit failed: the attempt dropped) and made again on another
    GPU, with no pass that keeps the capacity between (an explaining pass made it): its new
    attempt may lie where the dropped one lay, yet it is a new attempt."""
    import gc

    from berth.core.transition import unstart

    gpus = [Gpu(i, f"GPU-{i}", "A100", 80 * GIB) for i in range(2)]
    nodes = {"": Node("", cpu=2000.0)}
    kept = KeptCapacity()
    for _ in range(20):  # (the freed attempt's memory is reused most of the time)
        job = Job(id=7, submit_time=7.0, request=Request(gpus=1))
        transition(job, State.RUNNING, now=7.0, gpus=(0,))
        kept.capacity(gpus, nodes, {}, set(), [job])
        unstart(job, now=8.0, reason="its start could not be recorded")
        gc.collect()
        transition(job, State.RUNNING, now=9.0, gpus=(1,))
        got = kept.capacity(gpus, nodes, {}, set(), [job])
        assert got.free == _fresh(gpus, nodes, {}, set(), [job]).free == [1.0, 0.0]
        transition(job, State.COMPLETED, now=10.0, exit_code=0)
        kept.capacity(gpus, nodes, {}, set(), [])
