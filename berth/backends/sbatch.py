"""The job spec of ``berth submit`` as an ``sbatch`` call: pure (no I/O), one function,
:func:`plan`, taking the job (a :class:`berth.wire.jobspec.JobSpec`).

What maps to what (docs/slurm.md says the same for users):

==========================  ===============================================================
berth                       sbatch
==========================  ===============================================================
``-g N`` (whole GPUs)       ``--gres=gpu:N`` (``gpu:TYPE:N`` with ``--gpu-name``), per node
``-N 2``                    ``-N 2``; the batch script runs the command under ``srun``
``--ntasks-per-node 4``     ``--ntasks-per-node=4`` (and ``srun``, as for ``-N``)
``-g 0`` (CPU only)          no ``--gres``; the script sets ``CUDA_VISIBLE_DEVICES=-1``
``-g 0.5`` (a fraction)     ``--gres=shard:K``, K = ceil(fraction x shards per GPU), when the
                            cluster defines shards; else refused
``--mem-per-gpu 16G``       ``--mem-per-gpu=16384M`` (host RAM; ``--mem`` for a fraction)
``-t``                      ``-t D-HH:MM:SS``
``-J`` / default name       ``-J``
``-o`` / ``-e``             ``-o`` / ``-e`` (``%j`` and the other patterns as sbatch reads
                            them); default ``<log dir>/%j.out`` (``%A_%a.out`` for arrays)
``-D`` / current dir        ``-D``
``--dependency EXPR``       ``--dependency=EXPR --kill-on-invalid-dep=yes`` (every form:
                            afterok, afterany, afternotok, after, ``?``, singleton; a job
                            whose dependency can never be met is CANCELLED, as locally)
``--requeue``               ``--requeue --signal=B:USR1@120 --open-mode=append``: the batch
                            script requeues the job on USR1 (``--max-requeues`` times)
``--hold``                  ``--hold``
``--begin TIME``            ``--begin=YYYY-MM-DDTHH:MM:SS`` (local time)
``-p`` priority             ``--nice=-PRIORITY`` (raising it is for Slurm operators only)
``--export``                the job's environment is sbatch's, with ``--export=ALL``
``--array 0-9%2``           ``--array=0-9%2``
``--partition``             ``-p``
``--mail-user ADDR``        ``--mail-user=ADDR --mail-type=END,FAIL`` (or ``--mail-type``'s:
                            BEGIN, END, FAIL, REQUEUE, ALL or NONE, as sbatch's)
``--project NAME`` (``-A``) ``--account=NAME`` (Slurm's own limits and fair share apply)
``--sbatch-arg OPT``        ``OPT``, after berth's own (:mod:`berth.backends.sbatch_args`)
==========================  ===============================================================

The command is never put in a shell string: sbatch runs a batch script berth writes
(:mod:`berth.backends.slurm_script`; the environment setup, ``--env-setup`` / ``--conda``, is
the user's own shell text) that ends in ``exec "$@"``, and the command's words are sbatch's
arguments to that script. A sweep (``array_argvs``: task i runs command i) is one
``--array=0-(N-1)`` job whose script picks the task's command, as quoted words, by
``$SLURM_ARRAY_TASK_ID``. ``--inject-arg`` and ``{gpus}`` / ``{cuda}`` are applied by the
script on the node, to the GPUs Slurm gave the job, as the local daemon applies them.
``--wrap`` is the user's shell string, run by ``/bin/sh -c`` as on the local daemon.

Refused, with the reason (Slurm cannot do it, or it would mean something else there):
``--mem`` (GPU memory: Slurm does not schedule by it), ``--gpu-ids`` / ``--prefer`` (GPUs of one
machine), ``--retries``, ``--retry-oom``, ``--pty``, ``--unique``, ``--notify``, and a fraction
without shards. Learned memory (``learn_mem``: no -g, no --mem) does not apply there: the job
gets whole GPUs, as it asked.
"""

from __future__ import annotations

import math
import os

from berth.backends import sbatch_args, slurm_script
from berth.backends.base import SubmitRefused, Unsupported
from berth.errors import UsageError
from berth.wire import inject
from berth.wire.env import CONDA_HOOK, CONDA_SETUP, SETUP_SCRIPT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from berth.backends.base import ArraySpec
    from berth.wire.jobspec import JobSpec

MIB = 1 << 20
# --requeue: USR1 this many seconds before the time limit (Slurm may send it up to 60 s
# earlier: its timers tick once a minute); half the limit when that is shorter.
GRACE = 120


class Cluster:
    """What the mapping needs to know of the cluster: per node, its GPUs (by gres type, ``""``
    for untyped) and shards."""

    __slots__ = ("nodes",)

    def __init__(self, nodes: Mapping[str, tuple[Mapping[str, int], int]]) -> None:
        self.nodes = dict(nodes)  # node -> ({gpu type: count}, shards)

    @property
    def gpu_types(self) -> list[str]:
        return sorted({t for gpus, _ in self.nodes.values() for t in gpus if t})

    @property
    def shards_per_gpu(self) -> int:
        """The most shards any node gives one of its GPUs (0: no shards anywhere)."""
        best = 0
        for gpus, shards in self.nodes.values():
            n = sum(gpus.values())
            if shards and n:
                best = max(best, shards // n)
        return best


class Plan:
    """The sbatch call: ``argv`` (without the script and its arguments), the batch ``script``
    text, the script's arguments (``args``: the command) and sbatch's environment (``env``)."""

    __slots__ = ("args", "argv", "env", "notes", "script", "stderr", "stdout")

    def __init__(
        self,
        argv: list[str],
        script: str,
        args: list[str],
        env: dict[str, str],
        stdout: str,
        stderr: str,
    ) -> None:
        self.argv = argv
        self.script = script
        self.args = args
        self.env = env
        self.stdout = stdout
        self.stderr = stderr
        self.notes: list[str] = []  # what berth changed to fit Slurm (said on submit)


def _refuse(what: str, why: str) -> Unsupported:
    return Unsupported(f"{what}: not on Slurm: {why}")


def _gres(job: JobSpec, cluster: Cluster) -> str:
    gpus = job.gpus
    name = job.name_filter
    if gpus == 0:
        return ""  # (CPU only: no --gres; the script hides the node's GPUs from CUDA)
    if gpus > 1 and cluster.nodes and not name:
        most = max(sum(g.values()) for g, _ in cluster.nodes.values())
        if gpus > most:
            raise SubmitRefused(
                f"no node has {gpus:g} GPUs (the most on one node is {most}), so Slurm would "
                "refuse the job: ask for less, or see `sinfo -o '%N %G'`"
            )
    if job.nodes > 1 and cluster.nodes and not name:
        fit = sum(sum(g.values()) >= gpus for g, _ in cluster.nodes.values())
        if job.nodes > fit:
            raise SubmitRefused(
                f"-N {job.nodes} -g {gpus:g}: only {fit} node{'s' * (fit != 1)} of the cluster "
                f"{'have' if fit != 1 else 'has'} {gpus:g} GPUs (-g is per node), so Slurm "
                "would refuse the job: ask for fewer nodes, or see `sinfo -o '%N %G'`"
            )
    if gpus >= 1:
        if name:
            types = [t for t in cluster.gpu_types if name.lower() in t.lower()]
            if len(types) != 1:
                known = ", ".join(cluster.gpu_types) or "none (its GPUs are untyped)"
                which = "matches several" if types else "matches none"
                raise _refuse(
                    f"--gpu-name {name!r}",
                    f"it {which} of the cluster's GPU types ({known}); name one of them",
                )
            return f"gpu:{types[0]}:{int(gpus)}"
        return f"gpu:{int(gpus)}"
    spg = cluster.shards_per_gpu
    if not spg:
        raise _refuse(
            f"-g {gpus:g}",
            "this cluster defines no shards, so Slurm cannot give part of a GPU; ask for "
            "-g 1, or ask its admins for shards (GresTypes=gpu,shard; gres.conf Name=shard)",
        )
    if name:
        raise _refuse(f"--gpu-name {name!r} with -g {gpus:g}", "Slurm's shards have no GPU type")
    return f"shard:{max(1, math.ceil(gpus * spg - 1e-9))}"


def _time(seconds: float) -> str:
    s = math.ceil(seconds / 60) * 60  # (Slurm's limits are whole minutes)
    days, s = divmod(s, 86400)
    return f"{days}-{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _check(job: JobSpec) -> None:
    refused = (
        ("mem", "--mem", "Slurm does not schedule by GPU memory; a whole GPU comes with all "
         "of its memory (pick a GPU type with --gpu-name), and --mem-per-gpu asks host RAM"),
        ("gpu_ids", "--gpu-ids", "Slurm chooses a node's GPUs; to pick GPUs inside an "
         "allocation run `berth daemon --inside-slurm` there"),
        ("prefer", "--prefer", "Slurm chooses a node's GPUs"),
        ("retries", "--retries", "Slurm does not retry a failed job; resubmit it, or use "
         "--requeue (Slurm requeues after a node failure or preemption)"),
        ("pty", "--pty", "a batch job has no terminal to attach to; use `srun --pty`"),
        ("unique", "--unique", "Slurm keeps no record berth could match a job against"),
        ("retry_oom", "--retry-oom", "berth does not watch a Slurm job's end to read its log "
         "and queue it again; ask for the memory it needs (-g 1, --gpu-name), or resubmit it"),
        ("notify", "--notify", "Slurm runs no command of yours when a job ends; --mail-user "
         "asks Slurm to mail you"),
    )  # fmt: skip
    for key, flag, why in refused:
        if getattr(job, key):
            raise _refuse(flag, why)


def plan(
    job: JobSpec,
    cluster: Cluster,
    *,
    log_dir: str,
    array: ArraySpec | None = None,
    partition: str | None = None,
    mem_per_gpu: int | None = None,
    environ: Mapping[str, str] | None = None,
    extra: Sequence[str] = (),
) -> Plan:
    """The sbatch call for ``job``. ``log_dir``: where logs go unless -o/-e say otherwise;
    ``environ``: variables sbatch
    itself needs (``SLURM_CONF``), kept even when ``--export`` dropped them; ``extra``: sbatch
    options passed through (:mod:`berth.backends.sbatch_args`).
    Raises :class:`Unsupported` for what Slurm cannot do."""
    _check(job)
    argvs = _sweep(job, array)
    gres = _gres(job, cluster)
    argv = ["sbatch", "--parsable", *([f"--gres={gres}"] if gres else [])]
    if job.nodes > 1:
        argv += ["-N", str(job.nodes)]
    if job.ntasks_per_node is not None:
        argv.append(f"--ntasks-per-node={job.ntasks_per_node}")
    if partition:
        argv += ["-p", partition]
    if mem_per_gpu is not None:
        if not gres:  # (-g 0)
            raise UsageError("--mem-per-gpu with -g 0: no GPU to size host RAM by; ask for "
                             "it with --sbatch-arg=--mem=SIZE")  # fmt: skip
        mib = f"{max(1, math.ceil(mem_per_gpu / MIB))}M"
        argv.append(f"--mem={mib}" if gres.startswith("shard:") else f"--mem-per-gpu={mib}")
    notes = []
    if job.time_limit:
        argv += ["-t", _time(job.time_limit)]
        if job.time_limit % 60:
            minutes = math.ceil(job.time_limit / 60)
            notes.append(
                f"time limit {job.time_limit:g} s is {minutes} minute{'s' * (minutes > 1)} on "
                "Slurm (its limits are whole minutes)"
            )
    argv_cmd = job.argv
    name = job.name or (os.path.basename(argv_cmd[0]) if argv_cmd else "wrap")
    argv += ["-J", name]
    default = "%A_%a.out" if array is not None else "%j.out"
    stdout = job.stdout or os.path.join(log_dir, default)
    stderr = job.stderr or stdout
    argv += ["-o", stdout, "-e", stderr, "-D", job.cwd]
    if job.dependency:  # (Slurm's own ids, its syntax: berth.backends.slurm_deps)
        argv.append(f"--dependency={job.dependency}")
        argv.append("--kill-on-invalid-dep=yes")  # one never met cancels it, as locally
    grace = GRACE if not job.time_limit else min(GRACE, max(1, int(job.time_limit) // 2))
    if job.requeue:  # at the time limit, the script requeues it (slurm_script.REQUEUE)
        argv += ["--requeue", f"--signal=B:USR1@{grace}", "--open-mode=append"]
    elif job.requeue is False:  # (never requeued, not even after a node failure)
        argv.append("--no-requeue")
    if job.hold:
        argv.append("--hold")
    if job.begin is not None:  # (sbatch reads local time, to the second)
        import time  # rare: --begin

        argv.append("--begin=" + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(job.begin)))
    if job.priority:
        argv.append(f"--nice={-job.priority}")
    if array is not None:
        argv.append(f"--array={array.text}")
    if job.mail_user:
        argv += [f"--mail-user={job.mail_user}", f"--mail-type={job.mail_type or 'END,FAIL'}"]
    if job.project:
        argv.append(f"--account={job.project}")
    argv.append("--export=ALL")
    argv += sbatch_args.check(extra, argv)
    env, setup = _environment(job, environ)
    args = ["/bin/sh", "-c", job.wrap] if job.wrap else list(argv_cmd or [])
    setup_text = SETUP_SCRIPT.format(setup=setup) if setup else ""
    script = _script(job, name, args, argvs, setup_text, grace)
    p = Plan(argv, script, [] if argvs is not None else args, env, stdout, stderr)
    p.notes = notes
    return p


def _environment(
    job: JobSpec, environ: Mapping[str, str] | None
) -> tuple[dict[str, str], str | None]:
    """The job's environment (with what sbatch itself needs from ``environ``) and its setup
    text (a conda environment activated first)."""
    env = dict(job.env)
    for key, value in (environ or {}).items():
        env.setdefault(key, value)
    setup = job.env_setup
    if job.conda:
        env["BERTH_CONDA_ENV"] = job.conda
        setup = CONDA_SETUP + ("\n" + setup if setup else "")
    elif setup and "conda" in setup:
        setup = CONDA_HOOK + "\n" + setup
    return env, setup


def _sweep(job: JobSpec, array: ArraySpec | None) -> list[list[str]] | None:
    """A sweep's commands (task i runs command i), checked against its array."""
    argvs = job.array_argvs
    if argvs is None:
        return None
    n = len(argvs)
    if array is None or array.indices != tuple(range(n)) or job.wrap or not n:
        raise UsageError(
            f"a sweep of {n} commands runs as the array 0-{n - 1}, one command per task "
            f"(not {array.text if array else 'without an array'}, nor with --wrap)"
        )
    return [list(a) for a in argvs]


def _script(
    job: JobSpec, name: str, args: list[str], argvs: list[list[str]] | None, setup: str,
    grace: int,
) -> str:  # fmt: skip
    """The batch script: the sweep's commands, the GPU ids put in the command as the local
    daemon puts them (:mod:`berth.wire.inject`), the setup, ``exec "$@"``."""
    words = [w for a in (argvs if argvs is not None else [args]) for w in a]
    placeholders = any("{gpus}" in w or "{cuda}" in w for w in words)
    flag_form = None
    if job.inject_arg and not job.wrap:  # (as the daemon: not in a --wrap)
        try:
            flag_form = inject.parse(job.inject_arg)
        except ValueError as e:
            raise UsageError(str(e)) from None
    machine = any("{gpus}" in w for w in words) or (
        flag_form is not None and flag_form[1] == "machine"
    )
    tasks = job.nodes > 1 or (job.ntasks_per_node or 1) > 1
    if tasks and _own_srun(argvs if argvs is not None else [args]):
        tasks = False  # (the user's own srun starts the tasks)
        if placeholders or flag_form:
            raise UsageError(
                f"{'--inject-arg' if flag_form else '{gpus}/{cuda}'} with a command that is "
                "srun: berth would put the first node's GPU ids in it, for every node; leave "
                "srun out (berth runs the command under srun itself when -N or "
                "--ntasks-per-node asks for several tasks, and each task gets its node's ids)"
            )
    if job.gpus == 0 and placeholders:
        raise UsageError(
            "{gpus}/{cuda} in the command of a -g 0 job: it has no GPU ids to put there; "
            "ask for GPUs, or leave them out"
        )
    return slurm_script.script(
        name,
        cpu_only=job.gpus == 0,
        tail=setup or 'exec "$@"',
        argvs=argvs,
        inject=flag_form,
        placeholders=placeholders,
        machine=machine,
        requeue=bool(job.requeue),
        most=job.max_requeues,
        grace=grace,
        tasks=tasks,
    )


def _own_srun(commands: list[list[str]]) -> bool:
    """Every command is ``srun ...`` (a --wrap string too: its first word)."""
    firsts = []
    for c in commands:
        word = c[2].split(None, 1)[0] if c[:2] == ["/bin/sh", "-c"] and c[2].strip() else c[0]
        firsts.append(os.path.basename(word))
    return bool(firsts) and all(w == "srun" for w in firsts)
