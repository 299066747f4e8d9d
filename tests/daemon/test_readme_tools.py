"""The README's per-tool tables (issue 27): every berth command beside an earlier tool's is run
here as the README writes it (`submit` with `--dry-run`: every check, nothing queued; the
others against a daemon), so the README cannot drift from what berth accepts."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from gjskit import fake_conda

README = Path(__file__).resolve().parents[2] / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(title)
    end = text.index("\n### ", start + 1)
    return text[start:end]


def _berth_commands(section: str, column: int) -> list[list[str]]:
    """The berth commands of a section's table: the code spans of its berth ``column``."""
    out = []
    rows = [r for r in section.splitlines() if r.startswith("| ") and "---" not in r]
    for row in rows[1:]:  # (the header)
        cells = row.strip("| ").split(" | ")
        for span in re.findall(r"`(berth [^`]+)`", cells[column] if len(cells) > column else ""):
            out.append(shlex.split(span))
    return out


def test_mgpu_sruns_table_runs_as_written(daemon):
    daemon.env.update(fake_conda(daemon.fake.root, envs=("myenv",)))  # (mgpu_srun's example env)
    daemon.start()
    commands = _berth_commands(_section("### Multi-GPU Scheduler"), 1)
    submits = [c for c in commands if c[1] == "submit"]
    assert len(submits) >= 6, commands
    seen = {}
    for argv in submits:
        out = daemon.berth("submit", "--dry-run", *argv[2:], cwd=str(daemon.fake.root))
        assert out.returncode == 0, (argv, out.stderr)
        job = json.loads(out.stdout)["job"]
        seen[" ".join(argv)] = job
    both = next(j for c, j in seen.items() if "--gpu-ids 0,1" in c)
    assert both["gpu_ids"] == [0, 1] and both["gpus"] == 2 and both["time_limit"] == 600
    assert both["mem"] == 8000 << 20 and both["by_memory"]  # 8000 MiB of each (issue 27.1)
    assert any(j.get("conda") == "myenv" for j in seen.values())
    assert any(j.get("priority") == 10 for j in seen.values())
    assert daemon.call("queue", all=True)["jobs"] == []  # dry runs queue nothing
    held = daemon.submit("true", hold=True)
    for argv in commands:
        if argv[1] in ("queue", "cancel"):
            words = [w.replace("<job_id>", str(held)) for w in argv[1:]]
            out = daemon.berth(*words)
            assert out.returncode == 0, (argv, out.stderr)
    assert daemon.job(held)["state"] == "CANCELLED"


def test_gpuselects_table_runs_as_written(fake_gpus):
    fake_gpus.setup(n=4, name="NVIDIA GeForce RTX 3090")
    commands = _berth_commands(_section("### gpuselect"), 1)
    selects = [c for c in commands if c[1] == "select"]
    assert len(selects) >= 6, commands
    for argv in selects:
        out = fake_gpus.berth(*argv[1:])
        assert out.returncode in (0, 1) and "usage:" not in out.stderr, (argv, out.stderr)


def test_scheduler_pys_table_runs_as_written(fake_gpus, tmp_path):
    """scheduler.py's rows: each `berth run`, `status`, `release` as the README writes it, in
    a directory with the examples' train.py and a `task` program on PATH."""
    import os
    import stat
    import sys

    fake_gpus.setup(n=4)
    (tmp_path / "train.py").write_text("import sys\nprint('ran', sys.argv[1:])\n")
    task = tmp_path / "task"
    task.write_text("#!/bin/sh\necho task ran\n")
    task.chmod(task.stat().st_mode | stat.S_IXUSR)
    python = tmp_path / "python"
    os.symlink(sys.executable, python)
    env = {"PATH": f"{tmp_path}:{os.environ['PATH']}"}
    commands = _berth_commands(_section("### scheduler.py"), 1)
    runs = [c for c in commands if c[1] == "run" and "python ..." not in c]  # (refused, said)
    assert len(runs) >= 3, commands
    for argv in [*runs, *(c for c in commands if c[1] in ("status", "release"))]:
        out = fake_gpus.berth(*argv[1:], env=env, cwd=str(tmp_path))
        assert out.returncode == 0, (argv, out.stderr)
        if argv[1] == "run":
            assert "ran" in out.stdout or (tmp_path / "out.txt").exists(), (argv, out.stdout)
