"""From a job's stored spec (a :class:`~berth.wire.jobspec.JobSpec`) and its GPUs to what the
supervisor executes: argv, environment, working directory, log files. Pure apart from reading
nothing; the daemon calls it.

Nothing the user sent runs through a shell unless they asked: ``--wrap`` is a shell string run
by ``/bin/sh -c``; ``--env-setup`` / ``--conda`` run their setup in ``bash`` and then ``exec``
the argv unchanged (passed as positional parameters, never re-parsed).

The job's GPU ids may go into its command (``--inject-arg``, ``{gpus}``/``{cuda}``:
:mod:`berth.wire.inject`); an array's task (``array_task`` in the spec: the array's id, the
task's index, the count, the lowest and highest index) sees ``BERTH_ARRAY_JOB_ID``, ``BERTH_ARRAY_TASK_ID``,
``BERTH_ARRAY_TASK_COUNT`` / ``_MIN`` / ``_MAX`` and the same ``SLURM_ARRAY_*`` variables (so
scripts written for Slurm arrays run as they are), and ``BERTH_JOB_ID`` is ``ID_TASK`` as on
Slurm; ``%A`` / ``%a`` in its log names are the array's id and the task's index.
"""

from __future__ import annotations

import os

from berth.devices.visible import cuda_env
from berth.wire import inject
from berth.wire.env import CONDA_HOOK, CONDA_SETUP, SETUP_SCRIPT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.wire.jobspec import JobSpec


def expand_pattern(
    pattern: str, job_id: int, cwd: str, user: str, array: tuple[int, int | str] | None = None
) -> str:
    """sbatch's filename patterns: %j job id, %u user, %A / %a an array's id and the task's
    index (outside an array: the job id, and nothing: a job that is not an array has no task
    index, so ``-o run_%A_%a.out`` is ``run_12_.out``; some sbatch versions write Slurm's
    NO_VAL, 4294967294, there); %x is not supported; %% a percent."""
    out = pattern.replace("%%", "\0").replace("%j", str(job_id)).replace("%u", user)
    if "%A" in out or "%a" in out:
        head, task = array if array is not None else (job_id, "")
        out = out.replace("%A", str(head)).replace("%a", str(task))
    out = out.replace("\0", "%")
    return out if os.path.isabs(out) else os.path.join(cwd, out)


def pty_path(spec: JobSpec, job_id: int, attempt: int) -> str | None:
    """Where the terminal of a ``--pty`` attempt listens, under a root daemon: in its user's
    own directory (the supervisor makes it as that user). None: beside the run file."""
    base = spec.pty_dir
    return f"{base}/{job_id}.{attempt}.pty" if base else None


def build_argv(spec: JobSpec, gpus: list[int] | None = None) -> list[str]:
    """What the supervisor executes; with the attempt's ``gpus`` (machine indices), its
    command gets their ids (:mod:`berth.wire.inject`)."""
    ids = gpus or []
    if spec.wrap:
        argv = ["/bin/sh", "-c", inject.fill(spec.wrap, ids)]
    else:
        argv = [inject.fill(a, ids) for a in spec.argv or ()]
        if spec.inject_arg:
            flag, form = inject.parse(spec.inject_arg)
            argv = inject.rewrite(argv, flag, inject.ids(ids, form))
    setup = spec.env_setup
    if spec.conda:
        setup = CONDA_SETUP + ("\n" + setup if setup else "")
    elif setup and "conda" in setup:  # e.g. mgpu_srun's --env-setup-cmd "conda activate myenv"
        setup = CONDA_HOOK + "\n" + setup
    if setup:
        argv = ["/bin/bash", "-c", SETUP_SCRIPT.format(setup=setup), "berth-job", *argv]
    return argv


def build_env(
    spec: JobSpec, job_id: int, gpus: list[tuple[int, str]], attempt: int = 1
) -> dict[str, str]:
    """The job's environment: the captured one, plus its GPUs and who it is. ``BERTH_ATTEMPT``
    (1, 2, ...) tells a job that was requeued or retried that it runs again (resume from a
    checkpoint), as Slurm's SLURM_RESTART_COUNT."""
    env = dict(spec.env)
    indices = ",".join(str(i) for i, _ in gpus)
    env.update(cuda_env([i for i, _ in gpus] if spec.gpus else []))  # (-g 0: "-1", none)
    env.update(
        BERTH_JOB_ID=str(job_id),
        BERTH_GPUS=indices,
        BERTH_GPU_UUIDS=",".join(u for _, u in gpus),
        BERTH_ATTEMPT=str(attempt),
    )
    if spec.conda:
        env["BERTH_CONDA_ENV"] = spec.conda
    array = spec.array_task
    if array:
        head, task, count, low, high = (str(v) for v in array)
        env["BERTH_JOB_ID"] = f"{head}_{task}"
        for prefix in ("BERTH_ARRAY_", "SLURM_ARRAY_"):
            env.update({prefix + "JOB_ID": head, prefix + "TASK_ID": task,
                        prefix + "TASK_COUNT": count, prefix + "TASK_MIN": low,
                        prefix + "TASK_MAX": high})  # fmt: skip
    return env


PRIVATE = "(private)"  # what a claim file says of a job's command under --private


def launch_spec(
    spec: JobSpec,
    job_id: int,
    gpus: list[tuple[int, str]],
    time_limit: float | None,
    kill_after: float,
    attempt: int = 1,
    private: bool = False,
) -> dict[str, Any]:
    """What the supervisor needs to run one attempt (whom it runs as is the supervisor's);
    ``umask``: the submitter's, applied to the job and to the logs it opens (a job from a
    client that did not say gets 077); ``claim_command``: what the job's claim files, which
    every user reads, say it runs (``private``: nothing, as `berth show` tells others)."""
    return {
        "argv": build_argv(spec, [i for i, _ in gpus]),
        "command": spec.command,  # as the user gave it
        "claim_command": PRIVATE if private else None,
        "env": build_env(spec, job_id, gpus, attempt),
        "cwd": spec.cwd,
        "stdout": spec.stdout_path,
        "stderr": spec.stderr_path,
        "time_limit": time_limit,
        "kill_after": kill_after,
        "pty": spec.pty,
        "pty_path": pty_path(spec, job_id, attempt),
        "umask": 0o077 if spec.umask is None else spec.umask,
    }
