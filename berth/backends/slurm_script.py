"""The batch script berth writes for a Slurm job: text only (pure), bash, with nothing of the
user's command ever re-parsed by a shell.

What the script does, in order:

1. Exports berth's variables (``BERTH_JOB_ID``, ``BERTH_ARRAY_*``, ``BERTH_GPUS``...); a
   job of no GPU (``-g 0``) gets ``CUDA_VISIBLE_DEVICES=-1`` (:data:`CPU_ONLY`) and an
   empty ``BERTH_GPUS``.
2. A sweep (``berth sweep``: each task of the array its own command) picks task i's command
   by ``$SLURM_ARRAY_TASK_ID`` from a ``case`` of ``set --`` lines whose every word is quoted
   by :func:`quote`; any other job's command is the script's arguments (``"$@"``), as sbatch
   passed them.
3. When the command wants its GPU ids (``--inject-arg``, ``{gpus}`` / ``{cuda}``:
   :mod:`berth.wire.inject`), computes them from what slurmd gave the job and puts them in
   the words of ``"$@"`` with bash's own string operations (no ``eval``, no re-parse), with
   the local queue's meaning: ``{cuda}`` and ``--inject-arg --cuda`` are ``0..n-1`` (the job's
   own numbering: CUDA numbers the devices of ``CUDA_VISIBLE_DEVICES`` from 0); ``{gpus}`` and
   ``--cuda=machine`` are the ids Slurm put in ``CUDA_VISIBLE_DEVICES`` (what ``$BERTH_GPUS``
   shows), which are the node's GPU indices (as ``SLURM_JOB_GPUS``) unless the cluster
   constrains devices with cgroups: then Slurm renumbers them from 0, and those are the only
   numbers that name the job's GPUs from inside it. Without ``CUDA_VISIBLE_DEVICES`` the ids
   are ``SLURM_STEP_GPUS`` / ``SLURM_JOB_GPUS``. A job that has no GPU ids, or (for
   ``{gpus}`` / ``--cuda=machine``) ids that are not indices (UUIDs, MIG devices), fails with
   the reason, exit status 127, its command not run.
4. Runs the environment setup (``--env-setup`` / ``--conda``: the user's own shell text),
   then ``exec "$@"``; with ``--requeue`` the command runs as the script's child instead, and
   the USR1 that sbatch's ``--signal=B:USR1@GRACE`` sends the script before the time limit
   requeues the job (``scontrol requeue``: the same job id, Slurm ends the command with
   SIGTERM, then SIGKILL after KillWait, and starts it again with ``SLURM_RESTART_COUNT``, so
   ``BERTH_ATTEMPT``, one more), at most ``--max-requeues`` times; after that the job runs on
   to its TIMEOUT, as on the local queue. The command's exit status is the job's. A USR1
   while more than GRACE + :data:`NEAR` s of the limit are left (``squeue -o %L``; none when
   the job has no limit) is not the warning but a signal sent to the job (``berth cancel -s
   USR1``: scancel ``--full`` signals the command too), so the script lets it be; it also
   outlives USR2, HUP and ALRM (the command's to handle), so a handled signal does not
   end the job.

A job of several tasks (``-N 2``, ``--ntasks-per-node 4``) runs its batch script on its first
node, as Slurm does; step 4 there runs ``srun --kill-on-bad-exit=1 /bin/bash -c TASK
berth-task "$@"``: srun starts the tasks on every node, and each task does step 3 itself,
with its own node's GPUs (``BERTH_GPUS``, ``{gpus}``, ``--inject-arg``), then ``exec "$@"``.
The job's exit status is the first failing task's (a task that fails ends the others, whose
SIGTERM would make srun's own status 143): :data:`FIRST_FAILED`. A command that is itself ``srun ...`` is left alone (run once, on the first node).
"""

from __future__ import annotations

import re
import shlex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

HEAD = """\
#!/bin/bash
# Written by berth (--backend slurm) for job {name}. The command is never re-parsed by a shell:
# it is this script's arguments ("$@") as sbatch passed them, or, for a sweep, quoted words.
export CUDA_DEVICE_ORDER=PCI_BUS_ID
if [ -n "${{SLURM_ARRAY_JOB_ID:-}}" ]; then
  export BERTH_ARRAY_JOB_ID="$SLURM_ARRAY_JOB_ID" BERTH_ARRAY_TASK_ID="$SLURM_ARRAY_TASK_ID"
  export BERTH_JOB_ID="${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}"
else
  export BERTH_JOB_ID="$SLURM_JOB_ID"
fi
export BERTH_GPUS="${{CUDA_VISIBLE_DEVICES:-}}"
export BERTH_ATTEMPT=$(( ${{SLURM_RESTART_COUNT:-0}} + 1 ))
"""

FAIL = """\
_berth_no() {
  echo "berth: $*; the command was not run" >&2
  exit 127
}
"""

IDS = """\
_berth_gpus=${CUDA_VISIBLE_DEVICES-}
if [ -z "$_berth_gpus" ] || [ "$_berth_gpus" = NoDevFiles ]; then
  _berth_gpus=${SLURM_STEP_GPUS:-${SLURM_JOB_GPUS-}}
fi
[ -n "$_berth_gpus" ] || _berth_no "Slurm gave this job no GPU ids (CUDA_VISIBLE_DEVICES \\
and SLURM_JOB_GPUS are unset) to put in its command"
IFS=, read -r -a _berth_list <<<"$_berth_gpus"
_berth_cuda=
for ((_berth_i = 0; _berth_i < ${#_berth_list[@]}; _berth_i++)); do
  _berth_cuda+=${_berth_cuda:+,}$_berth_i
done
"""

MACHINE = """\
[[ $_berth_gpus =~ ^[0-9]+(,[0-9]+)*$ ]] || _berth_no "Slurm named this job's GPUs \\
$_berth_gpus, not by index, so {gpus} and --inject-arg --cuda=machine mean nothing here; \\
use {cuda} or --inject-arg --cuda (0..n-1, as the job sees its GPUs)"
"""

FILL = """\
_berth_argv=()
for _berth_w in "$@"; do
  _berth_w=${_berth_w//"{gpus}"/"$_berth_gpus"}
  _berth_w=${_berth_w//"{cuda}"/"$_berth_cuda"}
  _berth_argv+=("$_berth_w")
done
set -- "${_berth_argv[@]}"
"""

# -g 0: no GPU. The job may have inherited CUDA_VISIBLE_DEVICES from where it was submitted
# (--export=ALL), and Slurm sets none for a job without GPUs: CUDA is told there are none. "-1"
# (an invalid index: CUDA enumerates up to the first invalid one, so none), not "" (none for
# CUDA too, but `${CUDA_VISIBLE_DEVICES:-0,1}` in a shell and `if os.environ.get(...)` in
# Python read an empty value as unset: all GPUs).
CPU_ONLY = """\
export CUDA_VISIBLE_DEVICES=-1 BERTH_GPUS=
"""

# berth.wire.inject.rewrite, word for word: the flag's value replaced wherever the command has
# it (FLAG VALUE, FLAG=VALUE; FLAG as the last word gets one), else FLAG VALUE appended.
REWRITE = """\
_berth_flag={flag}
_berth_value=${value}
_berth_argv=("$1")
shift
_berth_found=
while [ $# -gt 0 ]; do
  if [[ $1 == "$_berth_flag" ]]; then
    _berth_argv+=("$1" "$_berth_value")
    _berth_found=1
    shift
    [ $# -gt 0 ] && shift
    continue
  fi
  if [[ $1 == "$_berth_flag="* ]]; then
    _berth_argv+=("$_berth_flag=$_berth_value")
    _berth_found=1
  else
    _berth_argv+=("$1")
  fi
  shift
done
[ -n "$_berth_found" ] || _berth_argv+=("$_berth_flag" "$_berth_value")
set -- "${{_berth_argv[@]}}"
"""

REQUEUE = """\
_berth_most={most}
_berth_near() {{
  local left days=0 s=0 part
  left=$(squeue -h -j "$SLURM_JOB_ID" -o %L 2>/dev/null) || return 0
  [[ $left =~ ^([0-9]+-)?[0-9]+(:[0-9]+)*$ ]] || return 1
  if [[ $left == *-* ]]; then days=${{left%%-*}}; left=${{left#*-}}; fi
  IFS=: read -r -a _berth_parts <<<"$left"
  for part in "${{_berth_parts[@]}}"; do s=$(( s * 60 + 10#$part )); done
  [ $(( days * 86400 + s )) -le {near} ]
}}
_berth_requeue() {{
  _berth_near || return 0
  if [ -n "$_berth_most" ] && [ "$BERTH_ATTEMPT" -gt "$_berth_most" ]; then
    echo "berth: the time limit is near; not requeued: --max-requeues $_berth_most reached" >&2
    return
  fi
  echo "berth: the time limit is near: requeued (attempt $BERTH_ATTEMPT ends)" >&2
  scontrol requeue "$BERTH_JOB_ID" || echo "berth: scontrol requeue failed" >&2
}}
_berth_pass() {{ :; }}
trap _berth_requeue USR1
trap _berth_pass USR2 HUP ALRM
"$@" &
_berth_child=$!
while kill -0 "$_berth_child" 2>/dev/null; do
  wait "$_berth_child"
done
wait "$_berth_child"
"""

# A USR1 is the time limit's warning when at most grace + NEAR s are left (Slurm's timers may
# send it up to 60 s early); sooner, it is a signal sent to the job (the command's own).
NEAR = 90

# A job of several tasks: what each task runs (the text of TASK below), then srun for all.
SRUN = """\
IFS= read -r -d '' _berth_task <<'_BERTH_TASK_END'
{task}_BERTH_TASK_END
set -- srun --kill-on-bad-exit=1 /bin/bash -c "$_berth_task" berth-task "$@"
"""
# ... and the job's status: srun's is the highest of its tasks', which is 143 when a task
# fails while others run (--kill-on-bad-exit ends them with SIGTERM); the first failing
# task's own status is in srun's word for it ("srun: error: n2: task 1: Exited with exit
# code 3"), read from srun's stderr (still written to the job's log) through tee.
FIRST_FAILED = """\
_berth_err=$(mktemp) || _berth_err=/dev/null
trap : HUP INT TERM USR1 USR2  # (a signal for the job is srun's to pass on: the shell waits)
"$@" 2> >(tee -a "$_berth_err" >&2)
_berth_s=$?
wait $! 2>/dev/null
_berth_first=$(sed -n 's/^srun: error: .*: task [0-9]*: Exited with exit code \\([0-9][0-9]*\\)$/\\1/p' \\
  "$_berth_err" | head -n 1)
[ "$_berth_err" = /dev/null ] || rm -f "$_berth_err"
if [ "$_berth_s" -ne 0 ] && [ -n "$_berth_first" ] && [ "$_berth_first" -ne 0 ]; then
  exit "$_berth_first"
fi
exit "$_berth_s"
"""
TASK = """\
# (each task, on its node) berth's variables of this node, then the command
export BERTH_GPUS="${CUDA_VISIBLE_DEVICES:-}"
[ "$BERTH_GPUS" != -1 ] || BERTH_GPUS=
"""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def quote(word: str) -> str:
    """``word`` as one bash word that means exactly it: single quotes (:func:`shlex.quote`),
    or ``$'...'`` with escapes when it holds control characters, so that the script has no
    carriage return (sbatch refuses a script with CR LF) and every task stays one line."""
    if not _CONTROL.search(word):
        return shlex.quote(word)
    out = []
    for ch in word:
        if ch in "\\'":
            out.append("\\" + ch)
        elif _CONTROL.match(ch):
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def _ids(inject: tuple[str, str] | None, placeholders: bool, machine: bool) -> str:
    """What puts the GPU ids in the command (step 3), or nothing when none is wanted."""
    if not (inject or placeholders):
        return ""
    text = IDS + (MACHINE if machine else "") + (FILL if placeholders else "")
    if inject:
        flag, form = inject
        value = "_berth_cuda" if form == "job" else "_berth_gpus"
        text += REWRITE.format(flag=quote(flag), value=value)
    return text


def _tasks(argvs: Sequence[Sequence[str]]) -> str:
    lines = ['case "${SLURM_ARRAY_TASK_ID-}" in']
    for i, argv in enumerate(argvs):
        lines.append(f"  {i}) set -- {' '.join(quote(w) for w in argv)} ;;")
    lines.append(
        f"  *) _berth_no \"task ${{SLURM_ARRAY_TASK_ID-(none)}} is none of this sweep's"
        f' {len(argvs)} (0-{len(argvs) - 1})" ;;'
    )
    lines.append("esac")
    return "\n".join(lines) + "\n"


def script(
    name: str,
    *,
    tail: str,
    argvs: Sequence[Sequence[str]] | None = None,
    inject: tuple[str, str] | None = None,
    placeholders: bool = False,
    machine: bool = False,
    requeue: bool = False,
    most: int | None = None,
    grace: int = 120,
    tasks: bool = False,
    cpu_only: bool = False,
) -> str:
    """The batch script of job ``name``. ``tail``: what runs the command (``exec "$@"``,
    after the environment setup if any); ``argvs``: a sweep's commands, task i runs
    ``argvs[i]``; ``inject``: ``--inject-arg``'s (flag, form); ``placeholders``: some word
    holds ``{gpus}`` or ``{cuda}``; ``machine``: the machine's ids are wanted (``{gpus}``,
    ``--cuda=machine``); ``requeue``: requeue the job on the USR1 Slurm sends ``grace`` s
    before its time limit, at most ``most`` times (None: no bound); ``tasks``: run the command under srun, the ids put in by each task."""
    text = HEAD.format(name=name.replace("\n", " ").replace("\r", " "))
    if cpu_only:
        text += CPU_ONLY
    if argvs is not None:
        text += FAIL + _tasks(argvs)
    ids = _ids(inject, placeholders, machine)
    if tasks:
        text += SRUN.format(task=TASK + (FAIL if ids else "") + ids + 'exec "$@"\n')
    elif ids:
        text += ("" if argvs is not None else FAIL) + ids
    if requeue:
        head, _, rest = tail.rpartition('exec "$@"')
        trap = REQUEUE.format(most="" if most is None else most, near=grace + NEAR)
        tail = head + trap.rstrip("\n") + rest
    elif tasks:
        head, _, rest = tail.rpartition('exec "$@"')
        tail = head + FIRST_FAILED.rstrip("\n") + rest
    return text + tail + "\n"
