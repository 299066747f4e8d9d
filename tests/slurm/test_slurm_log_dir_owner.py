"""berth's Slurm log dir holds what sbatch runs as you (docs/slurm.md, "The batch script": a
script named by its content, shared by jobs that differ only in their command, and each job's
record). A script another user planted there under the name berth computes would run as you,
and a link planted there would have berth write through it: so berth keeps its scripts and
records only in a folder that is yours and that no one else may write to (nor replace, in a
parent others may write to without the sticky bit), and refuses any other, saying so, before
anything is submitted."""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from pathlib import Path

from slurmkit import Cli
from userkit import B, call_as, ensure_users


def _config(path: Path, log_dir: Path) -> str:
    path.write_text(f'[slurm]\nlog_dir = "{log_dir}"\n')
    return str(path)


def test_a_script_planted_in_a_shared_log_dir_never_runs(berth: Cli, tmp_path: Path) -> None:
    ensure_users()
    root = Path(tempfile.mkdtemp(prefix="berth-lab-", dir="/tmp"))  # (others reach it)
    root.chmod(0o755)
    try:
        _plant_and_submit(berth, tmp_path, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _plant(folder: Path, planted: Path, pwned: Path) -> None:
    """(As B, before the victim's first submit there.)"""
    os.makedirs(folder, mode=0o777)
    os.chmod(folder, 0o777)
    planted.write_text(f'#!/bin/sh\ntouch {pwned}\nexec "$@"\n')
    planted.chmod(0o755)


def _plant_and_submit(berth: Cli, tmp_path: Path, root: Path) -> None:
    # What berth writes for `-- true` in a log dir of its own: the script's name, its folder.
    mine = root / "mine"
    out = berth("submit", "--parsable", "-o", "/dev/null", "--", "true",
                BERTH_CONFIG=_config(tmp_path / "mine.toml", mine))  # fmt: skip
    assert out.returncode == 0, out.stderr
    [script] = glob.glob(str(mine / "*" / "batch-*.sh"))
    cluster, name = os.path.basename(os.path.dirname(script)), os.path.basename(script)
    pwned = root / "pwned"
    for mode in (0o1777, 0o777):  # a lab's shared folder: sticky (as /tmp), or not
        shared = root / f"lab-{mode:o}"
        shared.mkdir()
        shared.chmod(mode)
        folder, planted = shared / cluster, shared / cluster / name

        assert call_as(B, lambda f=folder, p=planted: _plant(f, p, pwned)) is None
        config = _config(tmp_path / f"lab-{mode:o}.toml", shared)
        out = berth("submit", "--parsable", "-o", "/dev/null", "--wait", "--", "true",
                    BERTH_CONFIG=config)  # fmt: skip
        assert not pwned.exists(), "the planted script ran"
        assert out.returncode == 2 and out.stdout == "", (mode, out.stdout, out.stderr)
        assert str(folder) in out.stderr and "only you may write" in out.stderr, out.stderr
        assert not pwned.exists()
        assert sorted(os.listdir(folder)) == [name]  # (nothing written beside it)


def test_a_copy_of_a_submitted_script_planted_there_never_runs(berth: Cli, tmp_path: Path) -> None:
    """`berth submit train.sh` runs a copy of the script named by its content, in the log
    dir (docs/slurm.md): another user who knows the script (a lab's shared repository) could
    plant that copy first."""
    import hashlib

    ensure_users()
    root = Path(tempfile.mkdtemp(prefix="berth-lab-", dir="/tmp"))
    root.chmod(0o755)
    try:
        shared = root / "lab"
        shared.mkdir()
        shared.chmod(0o1777)
        train = tmp_path / "train.sh"
        train.write_text("#!/bin/sh\necho training\n")
        train.chmod(0o755)
        digest = hashlib.sha256(train.read_bytes()).hexdigest()[:16]
        folder, pwned = shared / "scripts" / digest, root / "pwned"

        def plant() -> None:
            os.makedirs(folder, mode=0o777)
            for d in (folder, folder.parent):
                os.chmod(d, 0o777)
            (folder / "train.sh").write_text(f"#!/bin/sh\ntouch {pwned}\n")
            (folder / "train.sh").chmod(0o755)

        assert call_as(B, plant) is None
        out = berth("submit", "--parsable", "-o", "/dev/null", "--wait", str(train),
                    BERTH_CONFIG=_config(tmp_path / "lab.toml", shared))  # fmt: skip
        assert not pwned.exists(), "the planted copy ran"
        assert out.returncode == 2 and out.stdout == "", (out.stdout, out.stderr)
        assert str(shared / "scripts") in out.stderr and "only you may write" in out.stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)
