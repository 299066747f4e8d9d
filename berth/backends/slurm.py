"""The Slurm backend: berth's job spec run by an existing Slurm cluster.

Every call is a Slurm command (sbatch, squeue, scontrol, scancel, sinfo, and sacct when the
cluster keeps accounting), batched: one squeue for any number of jobs, never one per job.
The mapping of a job spec to sbatch is :func:`berth.backends.sbatch.plan`; the reading of the
commands' output is :mod:`berth.backends.slurm_query`.

Each submitted job leaves in berth's Slurm log dir (``[slurm] log_dir``, default
``<state dir>/slurm``), in the folder of its cluster (``<log dir>/<ClusterName>/``, logs too
unless -o says otherwise; only the user may write there: :mod:`berth.wire.owndir`), its batch
script ``batch-<hash>.sh`` (named by its content: the jobs of a sweep share one) and a record
``ID.json`` (name, log patterns, working directory, script, cluster), so that ``berth logs``
finds a job's output after Slurm has forgotten it. An older berth's ``<log dir>/ID.json`` too.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

from berth.backends import sbatch, slurm_act, slurm_config, slurm_deps
from berth.backends import slurm_query as q
from berth.backends.base import JobInfo, SubmitRefused, Submitted, aggregate, named
from berth.errors import BerthError, UsageError
from berth.wire.owndir import own_dir
from berth.wire.paths import state_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from berth.backends.base import ArraySpec
    from berth.backends.sbatch import Cluster, Plan
    from berth.wire.jobspec import JobSpec


# wait (berth wait, logs -f, submit --wait): Slurm is asked every POLL s at first, then less
# often while the jobs run on, at most every MAX_POLL s.
POLL, MAX_POLL = 0.5, 5.0


def _env() -> dict[str, str]:
    """Variables sbatch needs for itself even when ``--export`` dropped them from the job."""
    return {k: v for k, v in os.environ.items() if k in ("SLURM_CONF", "PATH")}


class Slurm:
    name = "slurm"

    def __init__(self, *, log_dir: str | None = None, partition: str | None = None) -> None:
        if log_dir is None:
            log_dir = os.path.join(state_dir(), "slurm")
        self.log_dir = os.path.abspath(log_dir)
        self.partition = partition
        self._config: slurm_config.Config | None = None
        self._cluster: Cluster | None = None
        self._watched: dict[str, JobInfo | None] = {}  # wait's jobs, as last seen
        self._next_poll, self._pause = 0.0, POLL

    # -- running Slurm's commands ----------------------------------------------------------

    def _run(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None, check: bool = True,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:  # fmt: skip
        conf = os.environ.get("SLURM_CONF")
        if conf is not None and not os.path.isfile(conf):  # (Slurm would retry it for 60 s)
            raise UsageError(
                f"SLURM_CONF={conf}: no such file; set it to the cluster's slurm.conf, or "
                "unset it (Slurm then reads its own, /etc/slurm/slurm.conf)"
            )
        try:
            done = subprocess.run(
                list(argv), capture_output=True, text=True, timeout=120, env=env, check=False,
                input=input,
            )  # fmt: skip
        except FileNotFoundError:
            raise BerthError(
                f"{argv[0]} is not installed here: run berth on a node of the Slurm cluster "
                "(its login node), or use the local queue (--backend local)"
            ) from None
        except subprocess.TimeoutExpired:
            raise BerthError(
                f"{argv[0]} did not answer in 120 s: is Slurm's controller up?"
            ) from None
        if done.returncode != 0:
            lost = slurm_config.no_cluster(done.stderr)
            if lost is not None:
                raise BerthError(lost)
        if check and done.returncode != 0:
            why = " ".join(q.errors(done.stderr)) or f"exit status {done.returncode}"
            raise BerthError(f"{' '.join(argv[:2])} failed: {why}")
        return done

    def cluster(self) -> Cluster:
        """The nodes' GPUs and shards (one sinfo, asked once: a --file of 200 jobs is 200
        sbatch calls, not 400)."""
        if self._cluster is None:
            argv = ["sinfo", "-h", "-N", "-o", f"%N{q.SEP}%G"]
            if self.partition:
                argv += ["-p", self.partition]
            self._cluster = q.cluster(self._run(argv).stdout)
            if self.partition and not self._cluster.nodes:
                raise SubmitRefused(
                    f"Slurm has no partition {self.partition!r} (or it has no nodes); "
                    "`sinfo -s` lists them"
                )
        return self._cluster

    def config(self) -> slurm_config.Config:
        """The cluster's settings berth uses (``scontrol show config``, asked once)."""
        if self._config is None:
            out = self._run(["scontrol", "show", "config"], check=False).stdout
            self._config = slurm_config.Config(out)
        return self._config

    def accounting(self) -> bool:
        """Whether sacct can be asked (the cluster runs slurmdbd)."""
        return self.config().accounting

    @property
    def dir(self) -> str:
        """This cluster's folder of the log dir: its records, scripts and default logs."""
        name = self.config().cluster
        return os.path.join(self.log_dir, name) if name else self.log_dir

    # -- submit ----------------------------------------------------------------------------

    def submit(
        self,
        job: JobSpec,
        array: ArraySpec | None = None,
        mem_per_gpu: int | None = None,
        extra: Sequence[str] = (),
    ) -> Submitted:
        job = slurm_deps.resolved(job, self.dir)  # (@: the last job submitted here)
        p = self.plan(job, array, mem_per_gpu, extra)
        self.config().check_array(array)  # (before sbatch: --test-only may not say)
        self._check_dependencies(slurm_deps.named(job))
        script = self._write_script(p.script)
        done = self._run([*p.argv, script, *p.args], env=p.env, check=False)
        if done.returncode != 0 or not done.stdout.strip():
            raise q.refusal(done.stderr, p.argv, self.partition, array)
        job_id = done.stdout.strip().split(";")[0]
        name = p.argv[p.argv.index("-J") + 1]
        user = job.env.get("USER") or q.user()
        record = {"id": job_id, "name": name, "user": user, "cwd": job.cwd,
                  "stdout": p.stdout, "stderr": p.stderr, "array": array and array.text,
                  "script": script, "cluster": self.config().cluster,
                  "submitted": time.time()}  # fmt: skip
        path = os.path.join(self.dir, f"{job_id}.json")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            json.dump(record, f)
        tasks = [f"{job_id}_{i}" for i in array.indices] if array is not None else []
        first = tasks[0] if tasks else job_id
        return Submitted(
            job_id,
            q.expand(p.stdout, first, user, name, job.cwd),
            q.expand(p.stderr, first, user, name, job.cwd),
            tasks,
            warnings=[*p.notes, *(f"Slurm says: {e}" for e in q.errors(done.stderr))],
        )

    def test_only(
        self,
        job: JobSpec,
        array: ArraySpec | None = None,
        mem_per_gpu: int | None = None,
        extra: Sequence[str] = (),
    ) -> tuple[Plan, list[str]]:
        """A dry run of :meth:`submit`: its checks, then the planned call as ``sbatch
        --test-only`` (the script on its stdin: nothing written or submitted); (the plan, what
        Slurm said: when and where the job would start). Slurm's refusal is submit's."""
        job = slurm_deps.resolved(job, self.dir)
        p = self.plan(job, array, mem_per_gpu, extra)
        self.config().check_array(array)  # (before sbatch: --test-only may not say)
        self._check_dependencies(slurm_deps.named(job))
        argv = [p.argv[0], "--test-only", *p.argv[1:], "/dev/stdin", *p.args]
        done = self._run(argv, env=p.env, check=False, input=p.script)
        if done.returncode != 0:
            raise q.refusal(done.stderr, p.argv, self.partition, array)
        return p, [line.removeprefix("sbatch: ") for line in q.errors(done.stderr)]

    def plan(
        self,
        job: JobSpec,
        array: ArraySpec | None = None,
        mem_per_gpu: int | None = None,
        extra: Sequence[str] = (),
    ) -> Plan:
        """The sbatch call ``submit`` would make (nothing is submitted nor written);
        ``extra``: sbatch options passed through (--sbatch-arg, a script's #SBATCH lines)."""
        job = slurm_deps.resolved(job, self.dir)
        return sbatch.plan(
            job, self.cluster(), log_dir=self.dir, array=array, partition=self.partition,
            mem_per_gpu=mem_per_gpu, environ=_env(), extra=extra,
        )  # fmt: skip

    def script_path(self, text: str) -> str:
        """Where the batch script ``text`` goes: the log dir, named by its content (jobs that
        differ only in their command share one)."""
        import hashlib  # heavy (~2 ms): submit only

        digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        return os.path.join(self.dir, f"batch-{digest}.sh")

    def _write_script(self, text: str) -> str:
        """The batch script in the log dir, written atomically, never changed afterwards."""
        own_dir(self.dir, "the Slurm log dir's folder", "set [slurm] log_dir to a folder of yours")
        path = self.script_path(text)
        if not os.path.exists(path):
            tmp = f"{path}.{os.getpid()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o700)
            with os.fdopen(fd, "wb") as f:
                f.write(text.encode("utf-8", "surrogateescape"))
            os.replace(tmp, path)
        return path

    def _check_dependencies(self, deps: Sequence[str]) -> None:
        """As the local queue: a dependency on a job Slurm does not know is refused (Slurm
        itself would ignore it and start the job at once)."""
        if not deps:
            return
        known = self.status(list(deps))
        ids = {i.extra.get("raw_id") for i in known.values()} | set(known)
        ids |= {i.array_job for i in known.values() if i.array_job}
        for d in deps:
            if d not in ids:
                raise UsageError(f"dependency on job {d}: Slurm knows no job {d}")

    # -- reading ---------------------------------------------------------------------------

    def _squeue(self, *args: str) -> list[JobInfo]:
        done = self._run(["squeue", "-h", "-o", q.SQUEUE_FORMAT, *args], check=False)
        if done.returncode != 0 and "Invalid job id" not in done.stderr:
            raise BerthError(f"squeue failed: {' '.join(q.errors(done.stderr))}")
        return self._counted(q.squeue_rows(done.stdout))

    def _sacct(self, *args: str) -> list[JobInfo]:
        done = self._run(["sacct", "-n", "-P", "-X", "-o", q.SACCT_FIELDS, *args], check=False)
        return self._counted(q.sacct_rows(done.stdout)) if done.returncode == 0 else []

    def _counted(self, rows: list[JobInfo]) -> list[JobInfo]:
        """The GPUs column as the local queue fills it: how many GPUs each job asked (a
        fraction for shards, which needs the cluster's shards per GPU: one sinfo)."""
        shards = 0
        if any("shard" in r.gpus for r in rows):
            shards = self.cluster().shards_per_gpu
        for r in rows:
            r.gpus = q.gpus(r.gpus, shards)
        return rows

    def status(self, ids: Sequence[str]) -> dict[str, JobInfo]:
        if not ids:
            return {}
        rows = self._squeue("-r", "--states=all", "-j", ",".join(ids))
        found = {r.id: r for r in rows}
        missing = [i for i in ids if not any(named(j, i) for j in found.values())]
        if (missing or any(r.finished for r in rows)) and self.accounting():
            for r in self._sacct("-j", ",".join(ids)):
                if r.id not in found:  # the controller has forgotten it: accounting has not
                    found[r.id] = r
                elif found[r.id].exit_code is None:
                    found[r.id].exit_code = r.exit_code
        self._codes(list(found.values()))
        return found

    def list(
        self, *, user: str | None = None, finished: bool = False, states: Sequence[str] = ()
    ) -> list[JobInfo]:
        wanted = q.states(states)
        finished = finished or bool(wanted - {"PENDING", "RUNNING", "COMPLETING"})
        args = ["--states=all"] if finished else []
        if user:
            args += ["-u", user]
        rows = self._squeue(*args)
        if finished and self.accounting():
            seen = {r.id for r in rows}
            since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 86400))
            extra = ["-u", user] if user else ["--allusers"]
            rows += [r for r in self._sacct("-S", since, *extra) if r.id not in seen]
        rows = [r for r in rows if r.state in wanted] if wanted else rows
        self._codes(rows)
        return rows

    def _codes(self, rows: Sequence[JobInfo]) -> None:
        """The exit codes still unknown (no accounting, or it lags, or it says 0:0 of a
        cancelled job) from the controller's records (ExitCode 0:15: ended by SIGTERM), and
        the one rule for a job a signal ended (:func:`slurm_query.signalled`)."""
        unknown = [r for r in rows if q.code_unknown(r)]
        if not unknown:
            return
        recs = q.scontrol_records(self._run(["scontrol", "-o", "show", "job"]).stdout)
        codes = {r.get("JobId"): r.get("ExitCode", "") for r in recs}
        for r in unknown:
            code = codes.get(r.extra.get("raw_id"))
            if code is not None:
                r.exit_code = q.exit_code(code)
            q.signalled(r)

    def show(self, job_id: str) -> dict[str, Any]:
        """Everything Slurm (and berth's record) says of one job."""
        info = self.status([job_id])
        done = self._run(["scontrol", "-o", "show", "job", job_id], check=False)
        recs = q.scontrol_records(done.stdout) if done.returncode == 0 else []
        record = self._record(job_id)
        if not info and not recs and record is None:
            raise UsageError(f"no Slurm job {job_id}: see `berth queue --all --backend slurm`")
        tasks = [i for i in info.values() if i.array_job == job_id]
        mine = tasks or [i for i in info.values() if i.extra.get("raw_id") == job_id]
        return {
            "id": job_id,
            "jobs": [i.to_dict() for i in (mine or list(info.values()))],
            "slurm": [q.record_fields(r) for r in recs],
            "berth": record,
        }

    def _record(self, job_id: str) -> dict[str, Any] | None:
        """berth's record of the job on this cluster (else an older berth's, kept by id
        only, unless it names another cluster)."""
        name = f"{job_id.split('_')[0]}.json"
        for path in (os.path.join(self.dir, name), os.path.join(self.log_dir, name)):
            try:
                with open(path) as f:
                    rec: dict[str, Any] = json.load(f)
            except (OSError, ValueError):
                continue
            if rec.get("cluster", self.config().cluster) == self.config().cluster:
                return rec
        return None

    def logs(self, job_id: str) -> tuple[str, str]:
        done = self._run(["scontrol", "-o", "show", "job", job_id], check=False)
        recs = q.scontrol_records(done.stdout) if done.returncode == 0 else []
        if len(recs) > 1:
            tasks = ", ".join(f"{r.get('ArrayJobId')}_{r.get('ArrayTaskId')}" for r in recs)
            raise UsageError(f"job {job_id} is an array ({tasks}): name one of its tasks")
        if recs and recs[0].get("StdOut"):
            out = recs[0]["StdOut"]
            return out, recs[0].get("StdErr") or out
        record = self._record(job_id)
        if record is None:
            raise UsageError(f"no Slurm job {job_id} (nor a record of it in {self.dir})")
        if record.get("array") and "_" not in job_id:
            raise UsageError(f"job {job_id} is an array ({record['array']}): name one task")
        args = (job_id, record["user"], record["name"], record["cwd"])
        return q.expand(record["stdout"], *args), q.expand(record["stderr"], *args)

    def watch(self, job_ids: Sequence[str]) -> None:
        """`berth wait`'s jobs, asked of together at each poll (not each at a poll of its own)."""
        self._watched.update((i, self._watched.get(i)) for i in job_ids)

    def wait(self, job_id: str, timeout: float) -> JobInfo | None:
        """The job once it has ended, or as last seen after ``timeout`` s. Slurm is asked at
        most every POLL s, backing off to MAX_POLL s while the jobs run on (across calls:
        `logs -f` calls this between reads), one squeue for every job waited for."""
        deadline = time.monotonic() + timeout
        self._watched.setdefault(job_id, None)
        while True:
            known = self._watched.get(job_id)
            if known is not None and known.finished:
                return known
            now = time.monotonic()
            if now >= self._next_poll:
                self._poll()
                if job_id not in self._watched:
                    return None
                continue
            if now >= deadline:
                return known
            time.sleep(max(0.0, min(self._next_poll, deadline) - now))

    def _poll(self) -> None:
        """One status query for every watched job not known to have ended; an unknown one is
        forgotten (wait returns None for it)."""
        ids = [i for i, info in self._watched.items() if info is None or not info.finished]
        found = self.status(ids)
        for i in ids:
            jobs = [j for j in found.values() if named(j, i)]
            if jobs:
                self._watched[i] = aggregate(i, jobs)
            else:
                del self._watched[i]
        self._next_poll = time.monotonic() + self._pause
        self._pause = min(self._pause * 1.5, MAX_POLL)

    # -- acting (berth.backends.slurm_act) --------------------------------------------------

    def cancel(self, ids: Sequence[str], signal: int | None = None) -> dict[str, str]:
        return slurm_act.cancel(self, ids, signal)

    def cancel_mine(self, states: Sequence[str], signal: int | None = None) -> dict[str, str]:
        return slurm_act.cancel_mine(self, states, signal)

    def hold(self, ids: Sequence[str], release: bool = False) -> Sequence[str]:
        """``berth hold`` / ``release-job``: :func:`berth.backends.slurm_act.hold`."""
        return slurm_act.hold(self, ids, release)
