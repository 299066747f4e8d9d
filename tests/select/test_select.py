"""berth.selection.choose: pure filtering and ranking of hand-built snapshots."""

from __future__ import annotations

import random

import pytest

from berth.devices.model import GpuProcess, GpuSnapshot
from berth.errors import UsageError
from berth.selection.choose import Claimed, matches, select
from berth.selection.filters import Filters

G = 1024**3


def gpu(i: int, **kw: object) -> GpuSnapshot:
    values: dict[str, object] = {
        "index": i,
        "uuid": f"GPU-{i:08d}-aaaa-bbbb-cccc-{i:012d}",
        "name": "NVIDIA A100-SXM4-80GB",
        "memory_total": 80 * G,
        "memory_used": 0,
        "memory_free": 80 * G,
        "utilization": 0,
        "memory_utilization": 0,
        "power_draw": 60.0,
        "power_limit": 400.0,
        "temperature": 30,
        "performance_state": 0,
        "processes": (),
    }
    values.update(kw)
    return GpuSnapshot(**values)  # type: ignore[arg-type]


def busy(i: int, n: int = 1, util: int = 50, used: int = 10 * G, pid0: int = 1000) -> GpuSnapshot:
    procs = tuple(GpuProcess(pid0 + k, used // n, user="bob", command="python") for k in range(n))
    return gpu(i, utilization=util, memory_used=used, memory_free=80 * G - used, processes=procs)


def four() -> list[GpuSnapshot]:
    return [gpu(0), busy(1), gpu(2), busy(3, util=87)]


def test_defaults_pick_an_idle_gpu_at_random():
    seen = set()
    for seed in range(30):
        sel = select(four(), Filters(seed=seed))
        assert sel.ok and len(sel.chosen) == 1
        seen.add(sel.ids[0])
    assert seen == {0, 2}


def test_two_idle_of_four_and_reasons_for_the_rest():
    sel = select(four(), Filters(2, seed=1))
    assert sel.ok and sorted(sel.ids) == [0, 2]
    assert sel.rejected[1] == ["utilisation 50% > 0%", "1 process > 0"]
    assert "utilisation 87% > 0%" in sel.rejected[3]


def test_shortfall_explains_every_rejected_gpu():
    sel = select(four(), Filters(3))
    assert not sel.ok
    assert len(sel.chosen) == 2
    line = sel.explain_shortfall()
    assert line.startswith("only 2 of 3 GPUs qualify: GPU 1: ")
    assert "GPU 3: utilisation 87% > 0%" in line and "\n" not in line


def test_packed_fills_the_busiest_that_qualifies():
    gpus = [gpu(0), busy(1, used=30 * G), gpu(2), busy(3, used=10 * G)]
    sel = select(gpus, Filters(2, max_procs=1, max_util=None, max_mem_util=None, order="packed"))
    assert sel.ids == [1, 3]


def test_orders_free_util_index_and_prefer():
    gpus = [
        gpu(0, memory_free=10 * G, utilization=5),
        gpu(1, memory_free=70 * G, utilization=1),
        gpu(2, memory_free=40 * G, utilization=0),
    ]
    loose = {"max_util": None, "max_mem_util": None}
    assert select(gpus, Filters(3, order="free", **loose)).ids == [1, 2, 0]
    assert select(gpus, Filters(3, order="util", **loose)).ids == [2, 1, 0]
    assert select(gpus, Filters(3, order="index", **loose)).ids == [0, 1, 2]
    assert select(gpus, Filters(3, order="free", prefer="0", **loose)).ids == [0, 1, 2]
    assert select(gpus, Filters(2, order="free", prefer=[2, 0], **loose)).ids == [2, 0]


def test_random_order_is_reproducible_with_a_seed_or_rng():
    gpus = [gpu(i) for i in range(8)]
    a = select(gpus, Filters(8, seed=7)).ids
    assert a == select(gpus, Filters(8, seed=7)).ids
    assert a == select(gpus, Filters(8, seed=random.Random(7))).ids
    assert sorted(a) == list(range(8))


def test_min_free_and_power_and_mem_util_filters():
    gpus = [
        gpu(0, memory_free=12 * G),
        gpu(1, power_draw=120.0),
        gpu(2, memory_utilization=40),
        gpu(3),
    ]
    sel = select(gpus, Filters(4, min_free=20 * G, max_power=80))
    assert sel.rejected[0] == ["free 12.0G < 20.0G"]
    assert sel.rejected[1] == ["power 120W > 80W"]
    assert sel.rejected[2] == ["memory utilisation 40% > 0%"]
    assert sel.ids == [3]


def test_power_not_supported_is_selectable_unless_a_power_filter_is_given():
    gpus = [gpu(0, power_draw=None, power_limit=None)]
    assert select(gpus, Filters()).ids == [0]
    sel = select(gpus, Filters(max_power=300))
    assert sel.rejected[0] == ["power n/a: --max-power needs a reading"]
    sel = select([gpu(0, memory_free=None)], Filters(min_free=G))
    assert sel.rejected[0] == ["free memory n/a: --min-free needs a reading"]


def test_unknown_idle_readings_do_not_fail_the_default_filters():
    g = gpu(0, utilization=None, memory_utilization=None, processes=None)
    assert select([g], Filters()).ids == [0]


def test_unhealthy_gpu_is_never_selected():
    lost = GpuSnapshot(1, "GPU-lost", "NVIDIA A100", healthy=False, error="GPU is lost")
    sel = select([gpu(0), lost], Filters(2, max_util=None, max_procs=None, max_mem_util=None))
    assert sel.ids == [0]
    assert sel.rejected[1] == ["unhealthy: GPU is lost"]
    pred = select([lost], Filters(predicate=lambda g: True))
    assert not pred.ok


def test_name_only_exclude_banned_and_predicate():
    gpus = [gpu(0), gpu(1, name="Quadro RTX 6000"), gpu(2), gpu(3)]
    sel = select(
        gpus,
        Filters(
            4,
            name="a100",
            only="0,1,2",
            exclude=[2],
            banned_names=["Quadro"],
        ),
        banned={0: "banned in config (inventory.ban)"},
    )
    assert sel.ids == []
    assert sel.rejected[0] == ["banned in config (inventory.ban)"]
    assert sel.rejected[1] == [
        "name matches banned 'Quadro'",
        "name 'Quadro RTX 6000' does not contain 'a100'",
    ]
    assert sel.rejected[2] == ["excluded"]
    assert sel.rejected[3] == ["not in --only"]
    sel = select(gpus, Filters(4, predicate=lambda g: g.index % 2 == 1))
    assert sorted(sel.ids) == [1, 3]
    assert sel.rejected[0] == ["rejected by predicate"]


def test_ids_by_uuid_and_prefix():
    gpus = four()
    assert matches(gpus[2], gpus[2].uuid)
    assert matches(gpus[2], gpus[2].uuid[:12])
    assert matches(gpus[2], gpus[2].uuid[4:14].upper())
    assert not matches(gpus[2], "GPU-")
    assert select(gpus, Filters(only=gpus[2].uuid)).ids == [2]


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"only": "99"}, "--only 99"),
        ({"exclude": "GPU-zzz"}, "--exclude GPU-zzz"),
        ({"prefer": "7"}, "--prefer 7"),
        ({"only": "GPU-000000"}, "ambiguous"),
    ],
)
def test_ids_naming_no_gpu_are_usage_errors(kw, needle):
    with pytest.raises(UsageError, match=needle):
        select(four(), Filters(**kw))


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"count": 0}, "-n/--count 0"),
        ({"order": "fastest"}, "--order 'fastest'"),
        ({"max_util": -1}, "--max-util -1"),
        ({"max_mem_util": 101}, "--max-mem-util 101"),
        ({"max_procs": -2}, "--max-procs -2"),
        ({"share": 1.5}, "share 1.5"),
        ({"share": 0.5, "count": 2}, "share 0.5 of 2"),
        ({"only": "-1"}, "--only -1"),
    ],
)
def test_bad_requests_name_the_value(kw, needle):
    with pytest.raises(UsageError, match=needle):
        Filters(**kw)


def test_logical_gpus_are_selected_on_claims_alone():
    gpus = [GpuSnapshot(i, f"logical-{i}", "logical GPU", logical=True) for i in range(3)]
    sel = select(gpus, Filters(2, min_free=20 * G, max_power=10, order="index"))
    assert sel.ids == [0, 1]
    held = {"logical-0": Claimed(1.0)}
    sel = select(gpus, Filters(3, order="index"), held)
    assert sel.rejected == {0: ["held by berth claims: 1.0 of 1.0"]}
    assert not select(gpus, Filters(order="index", name="A100")).ok


def test_exclusive_claim_takes_the_gpu():
    gpus = [gpu(0), gpu(1)]
    held = {gpus[0].uuid: Claimed(1.0, 0, ())}
    sel = select(gpus, Filters(2), held)
    assert sel.rejected[0] == ["held by berth claims: 1.0 of 1.0"]
    assert select(gpus, Filters(share=0.25), held).ids == [1]


def test_shares_sum_to_at_most_one():
    g = busy(0, n=1, util=70, pid0=500)
    held = {g.uuid: Claimed(0.5, 20 * G, {500})}
    # A whole-GPU request does not fit next to a share.
    assert (
        "held by berth claims: 0.5 of 1.0, 1 more does not fit"
        in (select([g], Filters(), held).rejected[0])
    )
    # A half fits; the co-tenant's utilisation and its process are not held against it.
    assert select([g], Filters(share=0.5), held).ids == [0]
    assert select([g], Filters(share=0.5, max_power=1), held).ids == [0]
    assert not select([g], Filters(share=0.6), held).ok


def test_declared_memory_must_fit():
    g = busy(0, util=10, used=2 * G, pid0=500)
    held = {g.uuid: Claimed(0.5, 60 * G, {500})}
    sel = select([g], Filters(share=0.5, mem=30 * G), held)
    assert sel.rejected[0] == ["berth claims declare 60.0G of 80.0G, 30.0G more does not fit"]
    assert select([g], Filters(share=0.5, mem=20 * G), held).ok


def test_mem_needs_free_memory_on_an_unshared_gpu():
    g = gpu(0, memory_free=10 * G, memory_used=70 * G)
    assert select([g], Filters(mem=20 * G)).rejected[0] == ["free 10.0G < 20.0G"]
    assert select([gpu(0)], Filters(mem=200 * G)).rejected[0] == ["total 80.0G < --mem 200G"]


def test_outside_processes_still_count_on_a_shared_gpu():
    procs = (GpuProcess(500, G), GpuProcess(900, G, user="eve"))
    g = gpu(0, processes=procs, utilization=40)
    held = {g.uuid: Claimed(0.5, 0, {500})}
    sel = select([g], Filters(share=0.5), held)
    assert sel.rejected[0] == ["1 process > 0"]
    assert select([g], Filters(share=0.5, max_procs=1), held).ok


def test_berth_pids_do_not_count_against_max_procs_for_whole_requests():
    g = gpu(0, processes=(GpuProcess(500, G),))
    # A stale holder pid on an otherwise unheld GPU (share 0): not counted.
    assert select([g], Filters(), {g.uuid: Claimed(0.0, 0, {500})}).ok
    assert not select([g], Filters()).ok


def test_explain_lines():
    sel = select(four(), Filters(1, order="index"))
    assert sel.explain() == [
        "GPU 0: chosen",
        "GPU 1: utilisation 50% > 0%; 1 process > 0",
        "GPU 2: qualifies (not needed)",
        "GPU 3: utilisation 87% > 0%; 1 process > 0",
    ]


def test_no_gpus_at_all():
    sel = select([], Filters())
    assert not sel.ok
    assert sel.explain_shortfall() == "no GPUs to choose from (1 requested)"
    sel = select([busy(0)], Filters(2))
    assert sel.explain_shortfall().startswith("no GPU qualifies (2 requested) (there are 1 GPUs)")


def test_allowing_processes_lifts_the_idle_utilisation_default():
    gpus = [gpu(0), busy(1, used=30 * G), gpu(2), busy(3, used=10 * G)]
    assert select(gpus, Filters(2, max_procs=1, order="packed")).ids == [1, 3]
    # An explicit limit still applies.
    sel = select(gpus, Filters(2, max_procs=1, max_util=10, order="packed"))
    assert sel.rejected[1] == ["utilisation 50% > 10%"]
    assert Filters().max_util == 0 and Filters(max_procs=2).max_mem_util is None
