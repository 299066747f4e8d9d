"""`berth --version` names the version and the build (issue 40.6, issue 39.3): a git
checkout's commit, a built package's stamp (setup.py's build_py), else its install date."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import berth

ROOT = Path(__file__).resolve().parents[2]
VERSION = [sys.executable, "-c", "import sys; from berth.cli.main import main; "
           "import berth; print(berth.__file__); sys.exit(main(['--version']))"]  # fmt: skip


def _head() -> tuple[str, str]:
    out = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %cs"],
                         capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    commit, date = out.stdout.split()
    return commit, date


def _version(site: Path | None, cwd: Path) -> tuple[str, str]:
    env = {**os.environ, "PYTHONPATH": str(site)} if site else dict(os.environ)
    out = subprocess.run(VERSION, capture_output=True, text=True, timeout=120, cwd=cwd, env=env)
    assert out.returncode == 0, out
    where, said = out.stdout.splitlines()
    return where, said


def test_a_git_checkout_names_its_commit(tmp_path: Path) -> None:
    commit, date = _head()
    where, said = _version(None, tmp_path)
    assert Path(where).resolve() == ROOT / "berth" / "__init__.py"
    assert said.startswith(f"berth {berth.__version__} (commit {commit} {date}"), said


def test_a_built_package_names_the_commit_it_was_built_from(tmp_path: Path) -> None:
    site = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    assert (site / "berth" / "admin" / "files" / "berth.service").is_file()  # package data
    commit, date = _head()
    where, said = _version(site, tmp_path)
    assert Path(where) == site / "berth" / "__init__.py"  # the built copy, no .git beside it
    assert said.startswith(f"berth {berth.__version__} (commit {commit} {date}"), said
    # Without the stamp: the date its metadata was installed, else it says it does not know.
    (site / "berth" / "_build.txt").unlink()
    assert _version(site, tmp_path)[1] == f"berth {berth.__version__} (build unknown)"
    info = site / f"gpu_berth-{berth.__version__}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: gpu-berth\nVersion: {berth.__version__}\n"
    )
    (info / "RECORD").write_text(f"{info.name}/METADATA,,\nberth/__init__.py,,\n")
    os.utime(info / "METADATA", (0, 86400 * 365))
    assert _version(site, tmp_path)[1] == f"berth {berth.__version__} (installed 1971-01-01)"
