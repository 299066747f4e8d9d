"""The earlier tools' option names in `berth run` and `berth select` (issue 40.5): gpuselect's
`-c` and its short flags `-u/-m/-p/-d` as README's table lists them, scheduler.py's
`--forced_gpu/-fg` and `--prefered_gpu/-pg`; gpuselect's `-n NAME`, where `-n` is berth's
count, refused with a message naming `--name`."""

from __future__ import annotations

from typing import Any

from berth.claims.ledger import Ledger

SHOW = 'echo "$CUDA_VISIBLE_DEVICES"'


def _gpus(r: Any) -> list[str]:
    assert r.returncode == 0, r.stderr
    return sorted(r.stdout.strip().split(","))


def test_gpuselect_count_c_in_run_and_select(fake_gpus: Any) -> None:
    fake_gpus.setup(n=4)
    assert len(_gpus(fake_gpus.berth("run", "-c", "2", "--", "sh", "-c", SHOW))) == 2
    assert len(_gpus(fake_gpus.berth("select", "-c", "3"))) == 3


def test_gpuselect_short_filters_work_as_their_long_forms(fake_gpus: Any) -> None:
    fake_gpus.setup(n=4)
    fake_gpus.update(0, util=4, mem_util=8)  # busy-ish, no processes
    fake_gpus.spawn_workload(visible="1", mem="1G", util=0)
    for cmd in (("select", "-n", "4"), ("run", "-g", "4", "--", "sh", "-c", SHOW)):
        # -d: only these; -u/-m: utilisation caps; -p: outside processes allowed
        r = fake_gpus.berth(*cmd[:1], "-d", "0,1", "-u", "5", "-m", "10", "-p", "1", "-c", "2",
                            *cmd[3:])  # fmt: skip
        assert _gpus(r) == ["0", "1"], (cmd, r.stderr)
        r = fake_gpus.berth(cmd[0], "-d", "0", "-u", "3", "--explain" if cmd[0] == "select"
                            else "--timeout=0", *cmd[3:])  # fmt: skip
        assert r.returncode != 0 and "utilisation 4% > 3%" in r.stderr, r.stderr
        r = fake_gpus.berth(cmd[0], "-d", "1", "-p", "0", "-u", "100", "-m", "100",
                            *(["--timeout=0"] if cmd[0] == "run" else []), *cmd[3:])  # fmt: skip
        assert r.returncode != 0 and "1 process > 0" in r.stderr, r.stderr


def test_scheduler_py_forced_and_prefered_gpu(fake_gpus: Any) -> None:
    fake_gpus.setup(n=4)
    for flag in ("--forced_gpu", "-fg"):
        r = fake_gpus.berth("run", flag, "2", "--", "sh", "-c", SHOW)
        assert _gpus(r) == ["2"], flag
    for flag in ("--prefered_gpu", "-pg"):
        for _ in range(3):  # (random order otherwise: the preference decides every time)
            assert _gpus(fake_gpus.berth("run", flag, "3", "--", "sh", "-c", SHOW)) == ["3"]
    r = fake_gpus.berth("select", "-fg", "1", "-pg", "1")
    assert r.stdout == "1\n", r.stderr


def test_gpuselect_n_name_is_refused_naming_name(fake_gpus: Any) -> None:
    fake_gpus.setup(n=2)
    for cmd in (("select",), ("run", "--", "true")):
        r = fake_gpus.berth(cmd[0], "-n", "A6000", *cmd[1:])
        assert r.returncode == 2, r.stderr
        assert "'A6000'" in r.stderr and "--name A6000" in r.stderr, r.stderr
    assert Ledger().scan().claims == []
