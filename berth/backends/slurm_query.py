"""Reading Slurm: the text of squeue, scontrol, sacct and sinfo into berth's terms. Pure
functions of the commands' output (the calls are in :mod:`berth.backends.slurm`).

Only the format-string outputs are read (``squeue -o``, ``sacct -P -o``, ``sinfo -o``), and
``scontrol -o show job``'s one-line key=value records: they have been stable across Slurm
releases, where the ``--json`` outputs change shape with each data_parser version.
"""

from __future__ import annotations

import os
import pwd
import re
import time

from berth.backends.base import FINISHED, JobInfo, SubmitRefused
from berth.backends.sbatch import Cluster
from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from berth.backends.base import ArraySpec

SEP = "|"
# squeue -o: the name last (it may hold the separator); %A is the job's own (raw) id, %F and
# %K the array's id and the task's index (N/A outside arrays).
# %D and %P: its nodes (how many) and partition, in ``extra`` (``nodes``, ``partition``).
SQUEUE_FIELDS = ("%i", "%A", "%F", "%K", "%T", "%r", "%M", "%u", "%b", "%N", "%V", "%D", "%P",
                 "%j")  # fmt: skip
SQUEUE_FORMAT = SEP.join(SQUEUE_FIELDS)
SACCT_FIELDS = (
    "JobID,JobIDRaw,State,ExitCode,Elapsed,User,Submit,NodeList,ReqTRES,NNodes,Partition,JobName"
)

# Slurm's job states in berth's words (berth.core.states); anything else is shown as RUNNING
# with Slurm's word kept as ``native``.
STATES = {
    "PENDING": "PENDING", "REQUEUED": "PENDING", "REQUEUE_HOLD": "PENDING",
    "REQUEUE_FED": "PENDING", "RESV_DEL_HOLD": "PENDING",
    "RUNNING": "RUNNING", "CONFIGURING": "RUNNING", "SUSPENDED": "RUNNING",
    "STOPPED": "RUNNING", "SIGNALING": "RUNNING", "RESIZING": "RUNNING",
    "COMPLETING": "COMPLETING", "STAGE_OUT": "COMPLETING",
    "COMPLETED": "COMPLETED",
    "FAILED": "FAILED", "OUT_OF_MEMORY": "FAILED", "NODE_FAIL": "LOST",
    "BOOT_FAIL": "FAILED", "SPECIAL_EXIT": "FAILED",
    "CANCELLED": "CANCELLED", "REVOKED": "CANCELLED", "DEADLINE": "TIMEOUT",
    "TIMEOUT": "TIMEOUT", "PREEMPTED": "PREEMPTED",
}  # fmt: skip


def state(native: str) -> str:
    word = native.split()[0].rstrip("+") if native.strip() else "PENDING"  # sacct: "CANCELLED by 0"
    return STATES.get(word, "RUNNING")


def duration(text: str) -> float | None:
    """Slurm's ``[D-][HH:]MM:SS`` (``0:00``, ``1:02:03``, ``2-00:00:00``) in seconds."""
    text = text.strip()
    if not text or text in ("N/A", "INVALID", "UNLIMITED", "NOT_SET"):
        return None
    days, dash, rest = text.rpartition("-")
    try:
        parts = [int(p) for p in rest.split(":")]
        seconds = 0
        for p in parts:
            seconds = seconds * 60 + p
        if len(parts) == 1:
            seconds *= 60  # minutes alone
        return seconds + (int(days) * 86400 if dash else 0)
    except ValueError:
        return None


def timestamp(text: str) -> float | None:
    """``2026-11-24T13:23:34`` (the controller's local time) as a Unix time."""
    try:
        return time.mktime(time.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def exit_code(text: str) -> int | None:
    """``3:0`` (status 3) / ``0:9`` (killed by signal 9: 137, as a shell says) / ``0:0``."""
    status, colon, sig = text.strip().partition(":")
    try:
        code, signal = int(status), int(sig) if colon else 0
    except ValueError:
        return None
    return 128 + signal if signal and not code else code


# Ended by Slurm, not by their command: cancelled, out of time, or their node failed
# (NODE_FAIL, berth's LOST). Slurm ends them with SIGTERM (then SIGKILL).
SIGNALLED = ("TIMEOUT", "CANCELLED", "LOST")


def code_unknown(r: JobInfo) -> bool:
    """Whether a finished job's exit code is yet to be found: none read, or sacct's 0:0 of a
    job Slurm ended by a signal (its ExitCode is the allocation's; the controller's says
    0:15)."""
    if r.state in SIGNALLED:
        return not r.exit_code
    return r.exit_code is None and r.state in ("COMPLETED", "FAILED")


def signalled(r: JobInfo) -> None:
    """The one rule of both backends for a job a signal ended: 128 + the signal (143: SIGTERM,
    137: SIGKILL) when nobody knows which, a job that ran and was cancelled, timed out or
    lost its node (NODE_FAIL) was ended by Slurm's SIGTERM; one cancelled before it ran has no
    exit code. Whatever the code, `berth wait` exits 1 for each (``base.exit_status``): only
    a FAILED job's status is its command's."""
    if r.state in SIGNALLED and not r.exit_code:
        ran = r.state != "CANCELLED" or bool(r.elapsed) or bool(r.where)
        r.exit_code = 128 + 15 if ran else None


def _opt(text: str) -> str | None:
    text = text.strip()
    return None if text in ("", "N/A", "(null)", "None", "None assigned") else text


def squeue_rows(text: str) -> list[JobInfo]:
    """The lines of ``squeue -h -o SQUEUE_FORMAT``, one JobInfo per array task: a line of
    an array's pending tasks (``12_[3-9%2]``) gives one per task, ``array_limit`` 2.
    ``gpus`` is the gres as Slurm wrote it (``gpu:2``, ``shard:1``): :func:`gpus` reads it."""
    out = []
    for line in text.splitlines():
        cells = line.split(SEP, len(SQUEUE_FIELDS) - 1)
        if len(cells) != len(SQUEUE_FIELDS):
            continue
        shown, raw, array_id, task, native, reason, used, user, gres, nodes, submit, *more = cells
        count, partition, name = more
        st = state(native)
        in_array = _opt(task) is not None
        tasks, limit = _tasks(task) if in_array else ([None], None)
        for index in tasks:
            out.append(
                JobInfo(
                    f"{array_id}_{index}" if index is not None else shown, name, user, st,
                    native=native, reason=(_opt(reason) or "None") if st == "PENDING" else None,
                    gpus=(_opt(gres) or "").removeprefix("gres:"),
                    elapsed=duration(used) if st != "PENDING" else None,
                    where=_opt(nodes) or "", submit_time=timestamp(submit),
                    array_job=array_id if in_array else None, array_task=index,
                    array_limit=limit, extra=_extra(raw, count, partition),
                )
            )  # fmt: skip
    return out


def _extra(raw: str, nodes: str, partition: str) -> dict[str, Any]:
    """A row's ``extra``: its raw id, how many nodes, its partition (squeue's NODES and
    PARTITION columns)."""
    return {"raw_id": raw, "nodes": int(nodes) if nodes.strip().isdigit() else None,
            "partition": _opt(partition) or ""}  # fmt: skip


def _tasks(text: str) -> tuple[list[int | None], int | None]:
    """squeue's ``%K``: ``3`` -> ([3], None); ``3-5,7%2`` -> ([3, 4, 5, 7], 2)."""
    spec, _, limit = text.partition("%")
    out: list[int | None] = []
    for part in spec.split(","):
        first, dash, last = part.partition("-")
        if first.isdigit() and (not dash or last.isdigit()):
            out.extend(range(int(first), int(last if dash else first) + 1))
    return out or [None], int(limit) if limit.isdigit() else None


def gpus(gres: str, shards_per_gpu: int) -> str:
    """How many GPUs a job asked, as the local queue shows it: ``gpu:2`` / ``gpu:a100:2`` /
    ``gres/gpu=2`` -> ``2``; ``shard:1`` with 2 shards per GPU -> ``0.5``; anything else as
    it is; none (a CPU-only job: ``N/A``, empty) -> ``0``."""
    if gres.strip() in ("", "N/A", "(null)"):
        return "0"
    m = re.fullmatch(r"(?:gres[:/])?(gpu|shard)(?::[^:=,]+)?[:=](\d+)", gres.strip())
    if m is None:
        return gres
    kind, n = m.group(1), int(m.group(2))
    if kind == "gpu":
        return str(n)
    return f"{n / shards_per_gpu:g}" if shards_per_gpu else gres


def _tres_gres(tres: str) -> str:
    """sacct's ReqTRES (``billing=1,cpu=1,gres/gpu=2,mem=1G,node=1``): its GPU part."""
    items = [t for t in tres.split(",") if t.startswith(("gres/gpu", "gres/shard"))]
    plain = [t for t in items if ":" not in t.split("=")[0]]
    return (plain or items or [""])[0]


_KEY = re.compile(r" (?=[A-Z][\w/:]*=)")  # (scontrol's keys: JobId, TresPerNode, MCS_label)


def scontrol_records(text: str) -> list[dict[str, str]]:
    """The jobs of ``scontrol -o show job``, one dict of its key=value pairs each (a value may
    hold spaces: a pair ends where the next ``Key=`` begins; a value's words are kept)."""
    out = []
    for line in text.splitlines():
        if "JobId=" not in line:
            continue
        rec: dict[str, str] = {}
        for pair in _KEY.split(line.strip()):
            key, eq, value = pair.partition("=")
            if eq and key and " " not in key:
                rec[key] = value
            elif rec:  # (a value's next word, the split went too far)
                last = next(reversed(rec))
                rec[last] += " " + pair
        out.append(rec)
    return out


def sacct_rows(text: str) -> list[JobInfo]:
    """The lines of ``sacct -n -P -X -o SACCT_FIELDS`` (only the jobs, not their steps)."""
    out = []
    for line in text.splitlines():
        cells = line.split(SEP, 11)
        if len(cells) != 12:
            continue
        shown, raw, native, code, elapsed, user, submit, nodes, tres, *more = cells
        count, partition, name = more
        st = state(native)
        array_id, us, task = shown.partition("_")
        out.append(
            JobInfo(
                shown, name, user, st, native=native.split()[0] if native else native,
                exit_code=exit_code(code) if st in FINISHED else None,
                elapsed=duration(elapsed), where=_opt(nodes) or "", gpus=_tres_gres(tres),
                submit_time=timestamp(submit),
                array_job=array_id if us else None,
                array_task=int(task) if us and task.isdigit() else None,
                extra=_extra(raw, count, partition),
            )
        )  # fmt: skip
    return out


_GRES = re.compile(r"(gpu|shard)(?::([^:(,]+))?(?::(\d+))?")


def parse_gres(text: str) -> tuple[dict[str, int], int]:
    """``gpu:a100:4(S:0-1),shard:8`` -> ({"a100": 4}, 8)."""
    gpus: dict[str, int] = {}
    shards = 0
    for item in re.split(r",(?![^(]*\))", text):
        m = _GRES.fullmatch(item.split("(")[0].strip())
        if not m:
            continue
        kind, a, b = m.groups()
        if b is None and a is not None and a.isdigit():
            kind_type, count = "", int(a)
        else:
            kind_type, count = (a or ""), int(b or 1)
        if kind == "gpu":
            gpus[kind_type] = gpus.get(kind_type, 0) + count
        else:
            shards += count
    return gpus, shards


def cluster(sinfo: str) -> Cluster:
    """The nodes of ``sinfo -h -N -o %N|%G`` (a node listed once per partition)."""
    nodes: dict[str, tuple[dict[str, int], int]] = {}
    for line in sinfo.splitlines():
        node, sep, gres = line.partition(SEP)
        if sep and node.strip():
            nodes[node.strip()] = parse_gres(gres.strip())
    return Cluster(nodes)


def accounting(config: str) -> bool:
    """Whether ``scontrol show config`` has an accounting storage sacct can read."""
    m = re.search(r"^AccountingStorageType\s*=\s*(\S+)", config, re.M)
    return bool(m) and m is not None and not m.group(1).endswith("/none")


def expand(pattern: str, job_id: str, user: str, name: str, cwd: str) -> str:
    """sbatch's filename patterns that berth can know after submission: %j %A %a %u %x %%
    (``12`` or ``12_3`` as ``job_id``); others (%N, %n...) are left as they are."""
    array_id, _, task = job_id.partition("_")
    values = {"j": job_id if not task else "%j", "A": array_id, "a": task or "4294967294",
              "u": user, "x": name, "%": "%"}  # fmt: skip
    out = re.sub(r"%(\d*)([jAaux%])", lambda m: _pad(values[m.group(2)], m.group(1)), pattern)
    return out if os.path.isabs(out) else os.path.join(cwd, out)


def _pad(value: str, width: str) -> str:
    return value.zfill(int(width)) if width and value.isdigit() else value


def record_fields(rec: dict[str, Any]) -> dict[str, Any]:
    """What ``berth show`` adds from scontrol's record of a job."""
    keys = ("JobId", "JobState", "Reason", "ExitCode", "RunTime", "TimeLimit", "SubmitTime",
            "StartTime", "EndTime", "Partition", "NodeList", "TresPerNode", "WorkDir",
            "Command", "StdOut", "StdErr", "Dependency", "Restarts", "Nice")  # fmt: skip
    return {k: rec[k] for k in keys if k in rec}


# sbatch's reasons for refusing a job, and what they mean for a berth user.
HINTS = {
    "Requested node configuration is not available": "no node{part} has what it asks "
    "({gres}{time}); ask for less, or see `sinfo -o '%N %G %l'`",
    "Invalid generic resource (gres) specification": "the cluster has no such GPU resource "
    "({gres}); see `sinfo -o '%N %G'`",
    "Requested time limit is invalid (missing or exceeds some limit)": "the time limit"
    "{time} is more than the partition allows; ask for less (see `sinfo -o '%P %l'`)",
    "Invalid partition name specified": "there is no partition{name}; `sinfo -s` lists them",
    "Invalid account or account/partition combination specified": "your Slurm account may "
    "not use this partition; ask the cluster's admins",
    "Job dependency problem": "a job named in --dependency cannot be depended on",
    "Invalid job array specification": "the cluster does not take the array {array} "
    "({tasks} tasks): its highest index must be below MaxArraySize (see `scontrol show config "
    "| grep MaxArraySize`); split it, e.g. a sweep into smaller grids",
    "Invalid --nice value": "-p {priority}: a higher priority (sbatch --nice={nice}) is for the "
    "cluster's Slurm operators; ask for -p 0 or less (-p -N is --nice=N: a lower priority), "
    "or ask its admins",
    "Unable to contact slurm controller": "Slurm's controller does not answer; try again "
    "later or ask the cluster's admins",
}


def states(states: Sequence[str]) -> set[str]:
    """``PD,R`` / ``pending`` as berth's state names (the local daemon's own check)."""
    if not states:
        return set()
    from berth.core.states import State  # heavy: berth.core (the scheduler); rare: -t

    try:
        return {State.parse(s).value for s in states if s.strip()}
    except ValueError as e:
        raise UsageError(str(e)) from None


def errors(stderr: str) -> list[str]:
    """sbatch: error: X -> X (and its warnings), one per line."""
    out = []
    for line in stderr.splitlines():
        line = line.strip()
        for prefix in ("error:", "warning:"):
            _, found, rest = line.partition(f": {prefix} ")
            if found:
                line = rest
                break
        if line:
            out.append(line)
    return out


def refusal(
    stderr: str, argv: Sequence[str], partition: str | None, array: ArraySpec | None = None
) -> SubmitRefused:
    """sbatch's refusal (its ``stderr``, of the call ``argv``) in berth's words, with what to
    do where Slurm's reason is a known one (:data:`HINTS`)."""
    said = [r for r in errors(stderr) if not r.startswith('Try "sbatch --help"')]
    reasons = said or [stderr.strip() or "sbatch failed without a reason"]
    reason = reasons[-1].removeprefix("Batch job submission failed: ")
    reason = reason.removeprefix("allocation failure: ").removeprefix("sbatch: ")  # (--test-only)
    gres = next((a.removeprefix("--gres=") for a in argv if a.startswith("--gres=")), "")
    limit = argv[argv.index("-t") + 1] if "-t" in argv else ""
    nice = next((a.removeprefix("--nice=") for a in argv if a.startswith("--nice=")), "0")
    hint = HINTS.get(reason)
    if hint:
        hint = hint.format(
            gres=gres,
            time=f", time limit {limit}" if limit and "{time}" in hint else "",
            part=f" in partition {partition!r}" if partition else "",
            name=f" {partition!r}" if partition else "",
            array=array.text if array is not None else "",
            tasks=len(array.indices) if array is not None else 1,
            nice=nice,
            priority=nice.removeprefix("-") if nice.startswith("-") else f"-{nice}",
        )
        return SubmitRefused(f"Slurm refused the job: {hint} (sbatch: {reason})")
    return SubmitRefused(f"Slurm refused the job: {reason}")


def user() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())
