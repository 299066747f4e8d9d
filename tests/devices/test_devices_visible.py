"""CUDA_VISIBLE_DEVICES parsed as CUDA does (cases from the CUDA programming guide)."""

from __future__ import annotations

import pytest

from berth.devices.model import GpuSnapshot
from berth.devices.visible import cuda_index, cuda_order, restrict_to_visible, visible_uuids

UUIDS = [
    "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6",
    "GPU-8932aaaa-0000-4106-c12f-20bd9faed9f6",  # shares "GPU-8932" with the first
    "GPU-1c2d3e4f-1111-2222-3333-444455556666",
    "GPU-f00dcafe-1111-2222-3333-444455556666",
]
GPUS = [
    GpuSnapshot(index=i, uuid=u, name="NVIDIA A100", pci_bus_id=f"00000000:{0x07 + 8 * i:02X}:00.0")
    for i, u in enumerate(UUIDS)
]


def no_mig(mig_uuid: str) -> str | None:
    return None


def indices(value: str | None, mig_parent=no_mig) -> list[int]:
    return [g.index for g in restrict_to_visible(GPUS, value, mig_parent=mig_parent)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, [0, 1, 2, 3]),  # unset: all
        ("", []),  # empty: none
        ("  ", []),
        ("0,1", [0, 1]),
        ("2,1", [2, 1]),  # enumerated in the order given
        ("0,2,-1,1", [0, 2]),  # the guide's example: stops at the invalid -1
        ("0,junk,2", [0]),
        ("1,7,2", [1]),  # out of range stops
        ("1,1,2", [1]),  # a duplicate stops
        ("3,GPU-f00d", [3]),  # the same GPU by index and UUID prefix is a duplicate too
        ("0,,1", [0]),  # an empty item stops
        (" 1 , 2 ", [1, 2]),  # whitespace around items is ignored
        ("GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", [0]),  # full UUID
        ("GPU-8932f937", [0]),  # a unique prefix
        ("GPU-1c2d,GPU-f00dcafe", [2, 3]),
        ("GPU-8932,2", []),  # ambiguous prefix: invalid, stops at once
        ("2,GPU-ffff", [2]),  # prefix that matches nothing
        ("8932f937", []),  # a UUID needs its GPU- prefix
        ("MIG-GPU-1c2d3e4f-1111-2222-3333-444455556666/1/0", [2]),  # old MIG form: parent
        ("MIG-GPU-1c2d3e4f-1111-2222-3333-444455556666/1/0,MIG-GPU-1c2d3e4f/2/0,0", [2, 0]),
        ("MIG-5c89dd2c-7c5a-5e4b-8a7d-6f1e9c3b2a10", []),  # new MIG form, unknown
        ("1,MIG-GPU-ffff/1/0,2", [1]),
    ],
)
def test_cuda_visible_devices(value: str | None, expected: list[int]) -> None:
    assert indices(value) == expected


def test_new_style_mig_ids_resolve_through_a_parent_lookup() -> None:
    parents = {"MIG-aaaa": UUIDS[3], "MIG-bbbb": UUIDS[3]}
    assert indices("MIG-aaaa,MIG-bbbb,0", mig_parent=parents.get) == [3, 0]
    assert indices("MIG-cccc,0", mig_parent=parents.get) == []


def test_indices_count_in_pci_bus_order_not_list_order() -> None:
    shuffled = [GPUS[2], GPUS[0], GPUS[3], GPUS[1]]
    assert [g.index for g in cuda_order(shuffled)] == [0, 1, 2, 3]
    assert [g.index for g in restrict_to_visible(shuffled, "0,3")] == [0, 3]


def test_cuda_index_maps_an_nvml_gpu_to_what_the_process_calls_it() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "2,0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert cuda_index(UUIDS[2], GPUS, env) == 0
    assert cuda_index(UUIDS[0], GPUS, env) == 1
    assert cuda_index(UUIDS[1], GPUS, env) is None
    assert cuda_index(UUIDS[3], GPUS, {}) == 3  # unset: everything, in PCI order
    # FASTEST_FIRST on identical GPUs is PCI bus order
    assert cuda_index(UUIDS[3], GPUS, {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}) == 3
    assert visible_uuids(GPUS, {"CUDA_VISIBLE_DEVICES": "GPU-f00d"}) == [UUIDS[3]]


def test_read_gpus_and_the_fake_workload_agree(fake_gpus) -> None:
    """berth's parser and the rig's independent 'CUDA' pick the same GPUs."""
    from berth.devices import read_gpus

    fake_gpus.setup(4)
    value = f"3,{fake_gpus.uuids[1][:10]},junk,0"
    proc = fake_gpus.spawn_workload(visible=value)
    gpus = read_gpus()
    mine = [g.index for g in restrict_to_visible(gpus, value)]
    theirs = [g.index for g in gpus if any(p.pid == proc.pid for p in g.processes or ())]
    assert mine == [3, 1] and sorted(theirs) == [1, 3]


def test_new_style_mig_ids_are_resolved_through_nvml(fake_gpus) -> None:
    from berth.devices import read_gpus

    fake_gpus.setup(4)
    fake_gpus.update(2, mig=["MIG-11111111-2222-3333-4444-555555555555", "MIG-66666666-7777"])
    gpus = read_gpus()
    value = "MIG-66666666-7777,MIG-11111111-2222-3333-4444-555555555555,0,MIG-99999999"
    assert [g.index for g in restrict_to_visible(gpus, value)] == [2, 0]
    assert [g.index for g in restrict_to_visible(gpus, value, mig_parent=lambda _: None)] == []
