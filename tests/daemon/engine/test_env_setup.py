"""--conda and --env-setup (the GPU Job Scheduler and mgpu_srun): the setup runs in bash before the command,
the command itself never goes through a shell, and a failed setup does not run the job."""

from __future__ import annotations

import os
import stat

from gjskit import CONDA as HOOK


def _fake_conda(root) -> dict[str, str]:
    """A conda on PATH with one environment, ``myenv``, holding a tool ``mytool``."""
    bin_dir, env_bin = root / "condabin", root / "envs" / "myenv" / "bin"
    bin_dir.mkdir()
    env_bin.mkdir(parents=True)
    for path, text in (
        (bin_dir / "conda", HOOK.replace("ROOT", str(root))),
        (env_bin / "mytool", '#!/bin/sh\necho "mytool from myenv: $CONDA_DEFAULT_ENV"\n'),
    ):
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_conda_and_env_setup_run_before_the_command_and_a_failed_setup_stops_it(daemon):
    daemon.start(gpus=1)
    env = {**daemon.env, **_fake_conda(daemon.fake.root)}
    venv = daemon.fake.root / "venv"
    venv.mkdir()
    (venv / "activate").write_text("export IN_VENV=yes\n")
    jobs = {
        "conda": daemon.submit("mytool", conda="myenv", env=env),
        "setup": daemon.submit(  # mgpu_srun's form: conda's shell function is there too
            "mytool", env_setup="conda activate myenv", env=env
        ),
        "venv": daemon.submit(
            "sh",
            "-c",
            'echo "venv=$IN_VENV $0 $1"',
            "a b",
            "$HOME",
            env_setup=f"source {venv}/activate",
            env=env,
        ),
        "no-env": daemon.submit("mytool", conda="missing", env=env),
        "bad-setup": daemon.submit(
            "sh", "-c", "echo should not run", env_setup="source /nonexistent/activate", env=env
        ),
    }
    rows = daemon.wait_done(list(jobs.values()))

    def log(name: str) -> str:
        return daemon.berth("logs", str(jobs[name])).stdout

    assert rows[jobs["conda"]]["state"] == "COMPLETED"
    assert log("conda") == "mytool from myenv: myenv\n"
    assert log("setup") == "mytool from myenv: myenv\n"
    assert log("venv") == "venv=yes a b $HOME\n"  # argv untouched: no shell expansion
    assert (rows[jobs["no-env"]]["state"], rows[jobs["no-env"]]["exit_code"]) == ("FAILED", 127)
    assert "EnvironmentNameNotFound: missing" in log("no-env")
    assert (rows[jobs["bad-setup"]]["state"], rows[jobs["bad-setup"]]["exit_code"]) == (
        "FAILED",
        127,
    )
    assert "should not run" not in log("bad-setup")
    assert "environment setup failed" in log("bad-setup")
