"""`berth run` with the earlier tools' ways of saying things (issue 10): --only naming several GPUs
takes them all, GPU ranges, --count/-gc/--gpu_count, --wrap, and a command given as one quoted
string refused with the two ways to write it."""

from __future__ import annotations

from typing import Any

from berth.claims.ledger import Ledger

SHOW = 'echo "$CUDA_VISIBLE_DEVICES"'


def _gpus(r: Any) -> list[str]:
    assert r.returncode == 0, r.stderr
    return sorted(r.stdout.strip().split(","))


def test_only_with_several_gpus_and_no_g_takes_all_of_them(fake_gpus: Any) -> None:
    fake_gpus.setup(n=4)
    # mgpu_srun's `--gpu-ids 0,1 -- torchrun --nproc_per_node=2`: both GPUs, not one of them
    assert _gpus(fake_gpus.berth("run", "--only", "0,1", "--", "sh", "-c", SHOW)) == ["0", "1"]
    # -g N keeps its meaning: N GPUs out of those named
    one = _gpus(fake_gpus.berth("run", "-g", "1", "--only", "0,1", "--", "sh", "-c", SHOW))
    assert len(one) == 1 and one[0] in ("0", "1")


def test_only_takes_ranges(fake_gpus: Any) -> None:
    fake_gpus.setup(n=4)
    r = fake_gpus.berth("run", "--only", "1-3", "--", "sh", "-c", SHOW)
    assert _gpus(r) == ["1", "2", "3"]
    r = fake_gpus.berth("run", "-g", "1", "--only", "0-1,3", "--exclude", "0-1", "--", "sh", "-c",
                        SHOW)  # fmt: skip
    assert _gpus(r) == ["3"]


def test_bad_ranges_are_refused_naming_the_value(fake_gpus: Any) -> None:
    fake_gpus.setup(n=4)
    for value, needle in (("3-1", "goes down"), ("a-b", "not a range"), ("0-9999", "up to")):
        r = fake_gpus.berth("run", "--only", value, "--", "true")
        assert r.returncode == 2, (value, r.stderr)
        assert f"--only {value!r}" in r.stderr and needle in r.stderr, r.stderr
    r = fake_gpus.berth("run", "-g", "3", "--only", "0,1", "--", "true")
    assert r.returncode == 2 and "more GPUs than --only names (2)" in r.stderr, r.stderr
    assert Ledger().scan().claims == []


def test_count_aliases_of_the_seeds(fake_gpus: Any) -> None:
    fake_gpus.setup(n=4)
    for flag in ("--count", "-gc", "--gpu_count"):  # gpuselect --count; scheduler.py -gc
        assert len(_gpus(fake_gpus.berth("run", flag, "2", "--", "sh", "-c", SHOW))) == 2, flag


def test_wrap_runs_a_shell_string(fake_gpus: Any) -> None:
    fake_gpus.setup(n=1)
    r = fake_gpus.berth("run", "--wrap", 'echo "$CUDA_VISIBLE_DEVICES" && exit 3')
    assert r.returncode == 3 and r.stdout == "0\n", r.stderr
    r = fake_gpus.berth("run", "--wrap", "true", "--", "true")
    assert r.returncode == 2 and "not both" in r.stderr


def test_one_quoted_string_is_refused_with_how_to_run_it(fake_gpus: Any) -> None:
    fake_gpus.setup(n=1)
    r = fake_gpus.berth("run", "--", "python job.py --x 5")  # scheduler.py's quoted task
    assert r.returncode == 2, r.stderr
    assert "one quoted string" in r.stderr
    assert "berth run -- python job.py --x 5" in r.stderr
    assert "--wrap 'python job.py --x 5'" in r.stderr
    assert Ledger().scan().claims == []
    # a program whose name has a space still runs
    prog = fake_gpus.root / "my tool"
    prog.write_text("#!/bin/sh\necho ran\n")
    prog.chmod(0o755)
    r = fake_gpus.berth("run", "--", str(prog))
    assert r.returncode == 0 and r.stdout == "ran\n", r.stderr
