"""`berth run` from a shell that already set the CUDA variables (docs/devices.md,
"CUDA_VISIBLE_DEVICES"): the GPUs it may take are the ones the shell's value shows, read as
the CUDA runtime reads it (an order, a UUID prefix, a GPU named twice, an empty value: none),
and the command gets its GPUs in NVML's numbering with `CUDA_DEVICE_ORDER=PCI_BUS_ID`, never
the shell's `FASTEST_FIRST` nor an index counted inside the shell's list."""

from __future__ import annotations

from typing import Any

from berth.errors import EXIT_UNSATISFIED

SHOW = 'echo "$CUDA_VISIBLE_DEVICES|$CUDA_DEVICE_ORDER|$BERTH_GPUS|$BERTH_GPU_UUIDS"'


def _run(fake_gpus: Any, cvd: str, *args: str) -> tuple[int, list[str], str]:
    r = fake_gpus.berth("run", *args, "--", "sh", "-c", SHOW,
                        env={"CUDA_VISIBLE_DEVICES": cvd, "CUDA_DEVICE_ORDER": "FASTEST_FIRST"})
    return r.returncode, r.stdout.strip().split("|"), r.stderr


def test_the_command_gets_gpus_the_shell_shows_in_nvml_numbering(fake_gpus: Any) -> None:
    fake_gpus.setup(n=4)
    uuids = fake_gpus.uuids
    rc, (cvd, order, ids, got), err = _run(fake_gpus, "3,1", "-g", "2")
    assert rc == 0, err
    assert sorted(cvd.split(",")) == ["1", "3"] and ids == cvd and order == "PCI_BUS_ID"
    assert got.split(",") == [uuids[int(i)] for i in cvd.split(",")]
    rc, (cvd, order, ids, got), err = _run(fake_gpus, "3,1", "-g", "1", "--order", "index")
    assert rc == 0 and cvd in ("1", "3") and order == "PCI_BUS_ID", err  # never "0" (cuda:0)
    rc, (cvd, _, _, got), err = _run(fake_gpus, uuids[2][:12], "-g", "1")  # a UUID prefix
    assert rc == 0 and cvd == "2" and got == uuids[2], err
    rc, (cvd, _, _, _), err = _run(fake_gpus, "1,1,2", "-g", "1")  # twice: only 1 shown
    assert rc == 0 and cvd == "1", err
    rc, out, err = _run(fake_gpus, "1,1,2", "-g", "2", "--timeout", "1")
    assert rc != 0 and out == [""]  # 2 and after are not shown: 2 GPUs never fit
    rc, out, err = _run(fake_gpus, "", "-g", "1")  # set and empty: no GPU
    assert rc == EXIT_UNSATISFIED and out == [""]
    assert "CUDA_VISIBLE_DEVICES= shows 0 of the 4 GPUs here" in err
