"""From a job's stored spec and its GPUs to what the supervisor executes: argv, environment,
working directory, log files. Pure apart from reading nothing; the daemon calls it.

Nothing the user sent runs through a shell unless they asked: ``--wrap`` is a shell string run
by ``/bin/sh -c``; ``--env-setup`` / ``--conda`` run their setup in ``bash`` and then ``exec``
the argv unchanged (passed as positional parameters, never re-parsed).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Kept from the submitter's environment with --export NONE.
MINIMAL_ENV = ("HOME", "USER", "LOGNAME", "PATH", "SHELL", "LANG", "TERM")

# The job runs only if the setup succeeded (its last command's status), never half set up.
SETUP_SCRIPT = (
    "{setup}\n"
    "_berth_setup=$?\n"
    'if [ "$_berth_setup" -ne 0 ]; then\n'
    "  echo \"berth: the job's environment setup failed (status $_berth_setup);"
    ' the command was not run" >&2\n'
    "  exit 127\n"
    "fi\n"
    'exec "$@"'
)
# `conda activate` needs conda's shell function, which a non-interactive bash lacks.
CONDA_HOOK = (
    'eval "$(conda shell.bash hook)" 2>/dev/null || . "$(conda info --base)/etc/profile.d/conda.sh"'
)
CONDA_SETUP = CONDA_HOOK + '\nconda activate "$BERTH_CONDA_ENV" || exit 127'


def expand_pattern(pattern: str, job_id: int, cwd: str, user: str) -> str:
    """sbatch's filename patterns: %j job id, %u user, %x is not supported; %% a percent."""
    out = pattern.replace("%%", "\0").replace("%j", str(job_id)).replace("%u", user)
    out = out.replace("\0", "%")
    return out if os.path.isabs(out) else os.path.join(cwd, out)


def pty_path(spec: dict[str, Any], job_id: int, attempt: int) -> str | None:
    """Where the terminal of a ``--pty`` attempt listens, under a root daemon: in its user's
    own directory (the supervisor makes it as that user). None: beside the run file."""
    base = spec.get("pty_dir")
    return f"{base}/{job_id}.{attempt}.pty" if base else None


def build_argv(spec: dict[str, Any]) -> list[str]:
    if spec.get("wrap"):
        argv = ["/bin/sh", "-c", spec["wrap"]]
    else:
        argv = list(spec["argv"])
    setup = spec.get("env_setup")
    if spec.get("conda"):
        setup = CONDA_SETUP + ("\n" + setup if setup else "")
    elif setup and "conda" in setup:  # e.g. seed 003's --env-setup-cmd "conda activate myenv"
        setup = CONDA_HOOK + "\n" + setup
    if setup:
        argv = ["/bin/bash", "-c", SETUP_SCRIPT.format(setup=setup), "berth-job", *argv]
    return argv


def build_env(
    spec: dict[str, Any], job_id: int, gpus: list[tuple[int, str]], attempt: int = 1
) -> dict[str, str]:
    """The job's environment: the captured one, plus its GPUs and who it is. ``BERTH_ATTEMPT``
    (1, 2, ...) tells a job that was requeued or retried that it runs again (resume from a
    checkpoint), as Slurm's SLURM_RESTART_COUNT."""
    env = {str(k): str(v) for k, v in spec["env"].items()}
    indices = ",".join(str(i) for i, _ in gpus)
    env.update(
        CUDA_VISIBLE_DEVICES=indices,
        CUDA_DEVICE_ORDER="PCI_BUS_ID",
        BERTH_JOB_ID=str(job_id),
        BERTH_GPUS=indices,
        BERTH_GPU_UUIDS=",".join(u for _, u in gpus),
        BERTH_ATTEMPT=str(attempt),
    )
    if spec.get("conda"):
        env["BERTH_CONDA_ENV"] = spec["conda"]
    return env


def export_env(mode: str, environ: dict[str, str]) -> dict[str, str]:
    """``--export ALL|NONE|VAR,VAR``: the environment captured at submit (client side)."""
    if mode.upper() == "ALL":
        return dict(environ)
    keep = set(MINIMAL_ENV)
    if mode.upper() != "NONE":
        keep |= {v.strip() for v in mode.split(",") if v.strip()}
    return {k: v for k, v in environ.items() if k in keep}


def launch_spec(
    spec: dict[str, Any],
    job_id: int,
    gpus: list[tuple[int, str]],
    time_limit: float | None,
    kill_after: float,
    attempt: int = 1,
) -> dict[str, Any]:
    """What the supervisor needs to run one attempt (whom it runs as is the supervisor's);
    ``umask``: the submitter's, applied to the job and to the logs it opens (a job from a
    client that did not say gets 077)."""
    return {
        "argv": build_argv(spec),
        "command": spec.get("wrap") or " ".join(spec["argv"]),  # as the user gave it
        "env": build_env(spec, job_id, gpus, attempt),
        "cwd": spec["cwd"],
        "stdout": spec["stdout_path"],
        "stderr": spec["stderr_path"],
        "time_limit": time_limit,
        "kill_after": kill_after,
        "pty": bool(spec.get("pty")),
        "pty_path": pty_path(spec, job_id, attempt),
        "umask": spec.get("umask", 0o077),
    }
