"""`berth update` on Slurm: ``scontrol update JobId=ID`` of a pending job, with berth's
options mapped as ``berth submit`` maps them to sbatch (:mod:`berth.backends.sbatch`):

==========================  ===============================================================
berth update                scontrol update
==========================  ===============================================================
``-g N`` (whole GPUs)       ``Gres=gpu:N``
``-g 0.5`` (a fraction)     ``Gres=shard:K`` (K = ceil(fraction x shards per GPU)), when the
                            cluster defines shards; else refused
``-t``                      ``TimeLimit=D-HH:MM:SS`` (whole minutes)
``-p P``                    ``Nice=-P`` (as submit's ``--nice=-P``: lowering is anyone's;
                            raising a job's priority is for Slurm operators, and a refusal
                            says so)
``-J NAME``                 ``Name=NAME``
``--dependency EXPR``       ``Dependency=EXPR`` (``''``: ``Dependency=``, none)
==========================  ===============================================================

Only a pending job (held too): every job the id names is checked first, as ``berth hold``
checks them; an array's id updates its pending tasks (named one by one when some have
started, as scontrol would refuse the running ones).
"""

from __future__ import annotations

import math

from berth.backends import slurm_deps
from berth.backends import slurm_query as q
from berth.backends.base import named
from berth.backends.sbatch import _time as slurm_time
from berth.dependency import parse_dependency
from berth.errors import BerthError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.backends.slurm import Slurm


def _gres(backend: Slurm, gpus: float) -> str:
    if gpus >= 1:
        return f"gpu:{int(gpus)}"
    spg = backend.cluster().shards_per_gpu
    if not spg:
        raise UsageError(
            f"-g {gpus:g}: this cluster defines no shards, so Slurm cannot give part of a GPU; "
            "ask for -g 1"
        )
    return f"shard:{max(1, math.ceil(gpus * spg - 1e-9))}"


def settings(backend: Slurm, fields: dict[str, Any]) -> list[str]:
    """scontrol update's ``Key=value`` words for berth's checked ``fields``."""
    out = []
    if "gpus" in fields:
        out.append(f"Gres={_gres(backend, float(fields['gpus']))}")
    if "time_limit" in fields:
        out.append(f"TimeLimit={slurm_time(fields['time_limit'])}")
    if "priority" in fields:
        out.append(f"Nice={-int(fields['priority'])}")
    if "name" in fields:
        out.append(f"Name={fields['name']}")
    if "dependency" in fields:
        text = fields["dependency"] or ""
        if text:  # (@ made the last job berth submitted; as submit, an unknown id refused)
            text = slurm_deps.resolved_text(text, backend.log_dir)
            backend._check_dependencies(parse_dependency(text).jobs())
        out.append("Dependency=" + text)
    return out


def update(backend: Slurm, job_id: str, fields: dict[str, Any]) -> dict[str, list[str]]:
    """Change the pending job (or the pending tasks of the array) ``job_id``: id -> what
    was set."""
    found = backend.status([job_id])
    jobs = [j for j in found.values() if named(j, job_id)]
    if not jobs:
        raise UsageError(f"no job {job_id}: see `berth queue --all --backend slurm`")
    pending = [j for j in jobs if j.state == "PENDING"]
    if not pending:
        state = jobs[0].state
        raise UsageError(
            f"job {job_id} is {state}: only a pending job can be updated (a running job "
            f"keeps what it started with); cancel it and submit it again with the new values"
        )
    if "gpus" in fields and any(j.gpus == "0" for j in pending):  # (its script hides GPUs)
        raise UsageError(
            f"-g {fields['gpus']:g}: job {job_id} was submitted with -g 0 (CPU only), and its "
            "batch script hides the node's GPUs; cancel it and submit it again with -g"
        )
    ids = [job_id] if len(pending) == len(jobs) else [j.id for j in pending]
    words = settings(backend, fields)
    done = backend._run(["scontrol", "update", f"JobId={','.join(ids)}", *words], check=False)
    if done.returncode != 0:
        why = " ".join(q.errors(done.stderr)) or f"exit status {done.returncode}"
        priority = int(fields.get("priority") or 0)
        if priority > 0 and "permission denied" in why.lower():
            raise BerthError(
                f"-p {priority}: a higher priority (Nice={-priority}) is for the cluster's "
                f"Slurm operators (scontrol: {why}); ask for -p 0 or less (-p -N: a lower "
                "priority), or ask its admins"
            )
        raise BerthError(f"scontrol update failed: {why}")
    return {i: [f"updated: {w}" for w in words] for i in ids}
