"""The GPU Job Scheduler's README files, as they are, and what running them needs: a conda with the
README's environment, and its scripts at /path/to/ (README paths, unchanged).

The scripts live in a private mount namespace (``unshare --mount``): a tmpfs mounted on
``/path`` there holds ``/path/to/{train,eval,inference}.py``, seen by the daemon, its
supervisors and jobs, and by the CLI run with ``nsenter`` into it; the rest of the machine
sees only an empty ``/path`` directory (made once as the mount point, left in place: another
test run may be using it as its own mount point).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers import wait_until

# Copied from the GPU Job Scheduler's README (docs/ of the GPU Job Scheduler: "Job File Format" and "LLM Configuration").
JOBS_TXT = """\
# Comments start with #
0,/path/to/train.py,pytorch_env,--llm qwen2.5-7b-inst --epochs 100,0-3
1,/path/to/eval.py,pytorch_env,--llm qwen2.5-3b-inst --dataset test,
2,/path/to/inference.py,,--llm qwen2.5-32b-inst --batch_size 1,4,5,6,7
"""
LLM_CONFIG = """\
{
    "default_requirement": 1.0,
    "models": {
        "qwen2.5-3b-inst": 0.5,
        "qwen2.5-7b-inst": 1.0,
        "qwen2.5-32b-inst": 1.0,
        "qwen2.5-vl-3b-inst": 1.0,
        "qwen2.5-vl-7b-inst": 1.0,
        "qwen2.5-vl-32b-inst": 1.0
    }
}
"""

# Each script records how it was run: its arguments, its GPUs, its conda environment.
SCRIPT = """\
import json, os, sys
record = {"script": os.path.basename(__file__), "argv": sys.argv[1:],
          "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
          "conda": os.environ.get("CONDA_DEFAULT_ENV"), "job": os.environ.get("BERTH_JOB_ID")}
with open(os.path.join(os.environ["SEED_RESULTS"], record["script"] + ".json"), "w") as f:
    json.dump(record, f)
"""

CONDA = """#!/bin/bash
# A stand-in for conda: `conda shell.bash hook` defines the `conda` shell function, whose
# `activate` puts an environment's bin/ first on PATH, as the real one does.
if [ "$1" = shell.bash ] && [ "$2" = hook ]; then
  cat <<'EOF2'
conda() {
  if [ "$1" = activate ]; then
    if [ ! -d "ROOT/envs/$2" ]; then echo "EnvironmentNameNotFound: $2" >&2; return 1; fi
    export CONDA_DEFAULT_ENV="$2" PATH="ROOT/envs/$2/bin:$PATH"
  fi
}
EOF2
  exit 0
fi
[ "$1" = info ] && [ "$2" = --base ] && { echo ROOT; exit 0; }
exit 1
"""


def fake_conda(root: Path, envs: tuple[str, ...] = ("pytorch_env",)) -> dict[str, str]:
    """A conda on PATH whose environments hold a ``python`` (this interpreter), and a
    ``python`` on PATH outside them: the environment variables that say so."""
    base = root / "conda"
    (base / "condabin").mkdir(parents=True)
    conda = base / "condabin" / "conda"
    conda.write_text(CONDA.replace("ROOT", str(base)))
    conda.chmod(conda.stat().st_mode | stat.S_IXUSR)
    for name in envs:
        (base / "envs" / name / "bin").mkdir(parents=True)
        os.symlink(sys.executable, base / "envs" / name / "bin" / "python")
    plain = root / "bin"
    plain.mkdir()
    os.symlink(sys.executable, plain / "python")
    return {"PATH": f"{base / 'condabin'}:{plain}:{os.environ['PATH']}"}


def start_with_path_to(rig: Any, scripts: dict[str, str], *flags: str, gpus: int = 8) -> None:
    """Start the rig's daemon in a mount namespace where /path/to/ holds ``scripts``."""
    os.makedirs("/path", exist_ok=True)
    src = rig.fake.root / "path-to"
    src.mkdir()
    for name, text in scripts.items():
        (src / name).write_text(text)
    rig.fake.setup(n=gpus, memory="80G")
    setup = f'mount -t tmpfs tmpfs /path && mkdir /path/to && cp {src}/* /path/to/ && exec "$@"'
    with open(rig.log, "ab") as out:
        rig.proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", setup, "sh",
             sys.executable, "-m", "berth.cli.main", "daemon", "--foreground", *flags],
            env=rig.env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    wait_until(rig._answers, timeout=15, message="daemon answers")


def berth_inside(
    rig: Any, *args: str, env: dict[str, str] | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI, run in the daemon's mount namespace (it sees /path/to/ as the jobs do)."""
    where = cwd or os.getcwd()  # (entering a mount namespace starts at its root: go back)
    return subprocess.run(
        ["nsenter", "--target", str(rig.proc.pid), "--mount", f"--wd={where}", "--",
         sys.executable, "-m", "berth.cli.main", *args],
        env={**rig.env, **(env or {})}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
