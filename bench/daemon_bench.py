"""Benchmarks of the berth daemon (issue 4). Run from the repository root:

    .venv/bin/python bench/daemon_bench.py gap          # (a) dispatch gap on a freed GPU
    .venv/bin/python bench/daemon_bench.py throughput   # (b) 2,000 trivial jobs on 8 GPUs
    .venv/bin/python bench/daemon_bench.py submit       # (c) `berth submit` vs a Python floor
    .venv/bin/python bench/daemon_bench.py scale        # (d) 100,000 queued jobs
    .venv/bin/python bench/daemon_bench.py submits      # (d') 20,000 pipelined submits
    .venv/bin/python bench/daemon_bench.py nvml         # (e) jobs seen through NVML, vs tsp
    .venv/bin/python bench/daemon_bench.py all

Each starts a real daemon (``berth daemon --foreground``) in a temporary directory with a
declared inventory of logical GPUs (``[inventory] gpus = N``: the same scheduling, claims and
supervision path as with NVML, minus the driver), talks to it over its socket, and stops it.
(e) reads GPUs through the fake NVML library instead, with jobs that it lists as GPU
processes (bench/dispatch_nvml.py).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from berth.client import Client  # noqa: E402
from berth.errors import BerthError  # noqa: E402


class Daemon:
    def __init__(self, gpus: int, nvml_env: dict[str, str] | None = None) -> None:
        """``nvml_env``: read GPUs through NVML in that environment (the fake library's, see
        bench/dispatch_nvml.py) instead of declaring ``gpus`` logical ones."""
        self.dir = tempfile.mkdtemp(prefix="bb-", dir=os.environ.get("BENCH_DIR", "/tmp"))
        cfg = os.path.join(self.dir, "config.toml")
        with open(cfg, "w") as f:
            if nvml_env is None:
                f.write(f'[inventory]\ngpus = {gpus}\nmemory = "80G"\n[limits]\nmax_jobs = 1000000\n')
            elif os.environ.get("BENCH_POLL"):  # NVML poll interval (default 5 s)
                f.write(f"[daemon]\npoll_interval = {float(os.environ['BENCH_POLL'])}\n")
        self.socket = os.path.join(self.dir, "d.sock")
        # The claim ledger lives where berth puts it on a real host: /run/berth, a tmpfs
        # (here /dev/shm, also a tmpfs; BENCH_CLAIMS_ON_DISK=1 keeps it beside the state).
        on_disk = os.environ.get("BENCH_CLAIMS_ON_DISK") or not os.path.isdir("/dev/shm")
        self.claims = (
            os.path.join(self.dir, "claims")
            if on_disk
            else tempfile.mkdtemp(prefix="bb-claims-", dir="/dev/shm")
        )
        self.env = {
            **os.environ,
            **(nvml_env or {}),
            "BERTH_CONFIG": cfg,
            "BERTH_SOCKET": self.socket,
            "BERTH_STATE_DIR": os.path.join(self.dir, "state"),
            "BERTH_CLAIMS_DIR": self.claims,
        }
        os.environ.update({k: self.env[k] for k in ("BERTH_CONFIG", "BERTH_SOCKET")})
        profile = os.environ.get("BENCH_PROFILE")  # a file: run the daemon under cProfile
        prefix = ["-m", "cProfile", "-o", profile] if profile else []
        if os.environ.get("BENCH_WRAP"):  # a script that runs `-m berth.cli.main` (loop_phases.py)
            prefix = [os.environ["BENCH_WRAP"]]
        self.proc = subprocess.Popen(
            [sys.executable, *prefix, "-m", "berth.cli.main", "daemon", "--foreground"],
            env=self.env,
            stderr=open(os.path.join(self.dir, "daemon.log"), "wb"),
            cwd=ROOT,  # (`-m` puts its directory first on sys.path: this tree's berth runs)
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                self.call("ping")
                break
            except BerthError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise SystemExit("daemon did not start; see " + self.dir) from None
                time.sleep(0.02)

    def call(self, kind: str, **fields: Any) -> dict[str, Any]:
        with Client(self.socket, timeout=600) as c:
            return c.call(kind, **fields)

    def job(self, argv: list[str] | None = None, **extra: Any) -> dict[str, Any]:
        spec: dict[str, Any] = {"env": {"PATH": os.environ["PATH"]}, "cwd": self.dir, **extra}
        if argv is not None:
            spec["argv"] = argv
        return spec

    def submit_many(self, jobs: list[dict[str, Any]]) -> list[int]:
        """Pipelined on one connection: send all, then read all replies."""
        with Client(self.socket, timeout=600) as c:
            ids: list[int] = []
            window = 256
            sent = 0
            for spec in jobs:
                c.send("submit", job=spec)
                sent += 1
                if sent - len(ids) >= window:
                    ids.append(c.receive()["job_id"])
            while len(ids) < sent:
                ids.append(c.receive()["job_id"])
            return ids

    def wait_all(self, ids: list[int], timeout: float = 600) -> None:
        with Client(self.socket, timeout=None) as c:
            for i in ids:
                c.call("wait", job_id=i, timeout=timeout)

    def wait_idle(self, last: int, timeout: float = 600) -> None:
        """Until the daemon has no unfinished job (one connection, polled every 5 ms), then
        until the last one's end is durable (``wait`` answers once it is committed)."""
        deadline = time.monotonic() + timeout
        with Client(self.socket, timeout=None) as c:
            while c.call("ping")["jobs"] > 0:
                if time.monotonic() > deadline:
                    raise SystemExit("jobs did not finish")
                time.sleep(0.005)
            c.call("wait", job_id=last, timeout=timeout)

    def tree_cpu(self) -> float:
        """CPU seconds of the daemon and every process under it (fork server, supervisors,
        and the jobs they have reaped)."""
        tick = os.sysconf("SC_CLK_TCK")
        stats: dict[int, tuple[int, float]] = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/stat", "rb") as f:
                        fields = f.read().rsplit(b")", 1)[1].split()
                except OSError:
                    continue
                cpu = sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
                stats[int(name)] = (int(fields[1]), cpu)
        total, todo = 0.0, [self.proc.pid]
        while todo:
            pid = todo.pop()
            total += stats.get(pid, (0, 0.0))[1]
            todo += [p for p, (ppid, _) in stats.items() if ppid == pid]
        return total

    def own_cpu(self) -> float:
        """CPU seconds of the daemon's own process (all its threads)."""
        with open(f"/proc/{self.proc.pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        try:
            self.call("shutdown")
            self.proc.wait(timeout=30)
        except (BerthError, subprocess.TimeoutExpired):
            self.proc.kill()
        if not os.environ.get("BENCH_KEEP"):  # (throughput_ab.py --keep removes it later)
            shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.claims, ignore_errors=True)


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]


def bench_gap(n: int = 200) -> dict[str, Any]:
    """(a) Jobs on ONE GPU back to back; gap = next job's first instruction - previous job's
    last, both stamped by the jobs themselves (bash's $EPOCHREALTIME: no fork)."""
    d = Daemon(gpus=1)
    try:
        stamp = os.path.join(d.dir, "stamps")
        script = f'echo "s $BERTH_JOB_ID $EPOCHREALTIME" >> {stamp}; ' \
                 f'echo "e $BERTH_JOB_ID $EPOCHREALTIME" >> {stamp}'  # fmt: skip
        blocker = d.submit_many([d.job(["sleep", "1"])])
        ids = d.submit_many([d.job(["bash", "-c", script]) for _ in range(n)])
        d.wait_all(blocker + ids)
        starts: dict[int, float] = {}
        ends: dict[int, float] = {}
        with open(stamp) as f:
            for line in f:
                kind, job, t = line.split()
                (starts if kind == "s" else ends)[int(job)] = float(t)
        gaps = [(starts[b] - ends[a]) * 1000 for a, b in itertools.pairwise(ids)]
    finally:
        d.stop()
    return {
        "jobs": n,
        "gap_ms_p50": round(pct(gaps, 50), 2),
        "gap_ms_p99": round(pct(gaps, 99), 2),
        "gap_ms_max": round(max(gaps), 2),
    }


def bench_throughput(n: int = 2000, gpus: int = 8) -> dict[str, Any]:
    """(b) n trivial 1-GPU jobs (`true`) on 8 GPUs: first submit to last recorded end.
    Every job is durable (SQLite, synchronous=FULL) and runs under its own supervisor."""
    import resource

    d = Daemon(gpus=gpus)
    try:
        jobs = [d.job(["true"], gpus=1) for _ in range(n)]
        cpu0, own0 = d.tree_cpu(), resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        ids = d.submit_many(jobs)
        t_submitted = time.perf_counter() - t0
        d.wait_idle(ids[-1])
        total = time.perf_counter() - t0
        cpu = d.tree_cpu() - cpu0
        own1 = resource.getrusage(resource.RUSAGE_SELF)
        client = own1.ru_utime + own1.ru_stime - own0.ru_utime - own0.ru_stime
        rows = d.call("queue", all=True)["jobs"]
        ok = sum(r["state"] == "COMPLETED" for r in rows)
    finally:
        d.stop()
    return {
        "jobs": n,
        "gpus": gpus,
        "completed": ok,
        "submit_seconds": round(t_submitted, 3),
        "total_seconds": round(total, 3),
        "jobs_per_second": round(n / total, 1),
        "cpu_ms_per_job": round(cpu / n * 1000, 2),  # daemon + supervisors + jobs
        "client_cpu_ms_per_job": round(client / n * 1000, 2),
        "loadavg_1min": os.getloadavg()[0],
    }


def _time_cmd(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        out.append((time.perf_counter() - t) * 1000)
    return out


def bench_submit(runs: int = 40) -> dict[str, Any]:
    """(c) `berth submit --hold -- true` (console script) against the floor of any Python
    client: `python -c 'import argparse, json, socket'`, same interpreter, interleaved.
    berth's bytecode is compiled first, as an installed berth's is (with
    PYTHONDONTWRITEBYTECODE set, a module edited since its .pyc would be compiled on every
    run)."""
    import compileall

    compileall.compile_dir(os.path.join(ROOT, "berth"), quiet=2)
    d = Daemon(gpus=1)
    berth = os.path.join(os.path.dirname(sys.executable), "berth")
    try:
        floor: list[float] = []
        submit: list[float] = []
        bare: list[float] = []
        for _ in range(runs):
            floor += _time_cmd([sys.executable, "-c", "import argparse, json, socket"], d.env, 1)
            submit += _time_cmd([berth, "submit", "--hold", "--", "true"], d.env, 1)
            bare += _time_cmd([sys.executable, "-c", "pass"], d.env, 1)
    finally:
        d.stop()
    f, s, b = statistics.median(floor), statistics.median(submit), statistics.median(bare)
    return {
        "runs": runs,
        "python_pass_ms": round(b, 2),
        "floor_ms": round(f, 2),
        "submit_ms": round(s, 2),
        "ratio_to_floor": round(s / f, 3),
    }


def bench_scale(n: int = 100_000, gpus: int = 8) -> dict[str, Any]:
    """(d) n pending jobs behind 8 running ones: submit rate, `berth queue` time, daemon RSS,
    one scheduling pass."""
    d = Daemon(gpus=gpus)
    try:
        d.submit_many([d.job(["sleep", "600"], gpus=1) for _ in range(gpus)])
        jobs = [d.job(["true"], gpus=1) for _ in range(n)]
        t0 = time.perf_counter()
        d.submit_many(jobs)
        submit_s = time.perf_counter() - t0
        rss_queued = d.call("ping")["rss"]  # (the queue itself, before any listing)
        berth = os.path.join(os.path.dirname(sys.executable), "berth")
        # `berth queue` on a 50-line terminal asks for 46 lines (-n 46: the same request),
        # then the whole queue to a pipe; three runs each: (seconds, client peak RSS in MB,
        # seconds to the first byte of output)
        views: dict[str, list[tuple[float, float, float]]] = {}
        for name, args in (("screen", ["-n", "46"]), ("screen_r", ["-r", "-n", "46"]),
                           ("piped", []), ("piped_r", ["-r"]), ("json", ["--json"])):  # fmt: skip
            views[name] = [_time_one([berth, "queue", *args], d.env) for _ in range(3)]
            if name == "screen":  # its explaining pass: the head of the queue only
                explain_screen = d.call("ping")["last_explain_seconds"]
        explain_s = d.call("ping")["last_explain_seconds"]  # piped: it explained n jobs
        queue_s = statistics.median(t for t, _, _ in views["piped"])
        # A GPU frees: one dispatch pass over the n pending jobs (sort included: the queue
        # changed) starts the next one.
        d.submit_many([d.job(["true"], gpus=1)])
        d.call("cancel", job_ids=[1])
        time.sleep(1.0)  # let the pass run
        ping = d.call("ping")
        d.call("cancel", all_mine=True)
    finally:
        d.stop()
    return {
        "jobs": n,
        "submit_seconds": round(submit_s, 2),
        "submits_per_second": round(n / submit_s),
        "queue_seconds": round(queue_s, 2),
        "daemon_rss_mb_queued": round(rss_queued / 2**20, 1),
        "daemon_rss_mb": round(ping["rss"] / 2**20, 1),  # after the 15 listings
        "dispatch_pass_seconds": round(ping["last_pass_seconds"], 3),
        "explain_pass_seconds": round(explain_s, 3),
        **{f"queue_{k}": [[round(t, 3), round(rss, 1), round(first, 3)] for t, rss, first in v]
           for k, v in views.items()},
        "explain_screen_seconds": round(explain_screen, 4),
    }


def bench_submits(n: int = 20_000, gpus: int = 8) -> dict[str, Any]:
    """(d') n pipelined submits on one connection behind 8 running jobs (the first part of
    ``scale``, quicker): submits/s, and the daemon's CPU per submit (its threads: the loop and
    the committer)."""
    d = Daemon(gpus=gpus)
    try:
        d.submit_many([d.job(["sleep", "600"], gpus=1) for _ in range(gpus)])
        jobs = [d.job(["true"], gpus=1) for _ in range(n)]
        cpu0 = d.own_cpu()
        t0 = time.perf_counter()
        d.submit_many(jobs)
        seconds = time.perf_counter() - t0
        cpu = d.own_cpu() - cpu0
        d.call("cancel", all_mine=True)
    finally:
        d.stop()
    return {
        "jobs": n,
        "submits_per_second": round(n / seconds),
        "daemon_cpu_ms_per_submit": round(cpu / n * 1000, 3),
        "loadavg_1min": os.getloadavg()[0],
    }


def _time_one(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """One run of ``argv``, its output read and dropped: (wall seconds, peak RSS in MB, seconds
    to its first byte of output)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    first = proc.stdout.read(1)
    t_first = time.perf_counter() - t0
    while proc.stdout.read(1 << 20):
        pass
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0 or not first:
        raise RuntimeError(f"{argv} exited {proc.returncode}")
    return wall, usage.ru_maxrss / 1024, t_first


def bench_conditions(n: int = 200) -> dict[str, Any]:
    """The machine's state during the run: load average and the latency of one durable
    SQLite commit (WAL, synchronous=FULL) in /tmp, which bounds (a) and (b)."""
    import sqlite3

    d = tempfile.mkdtemp(prefix="bb-", dir="/tmp")
    try:
        db = sqlite3.connect(os.path.join(d, "t.db"), isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE t(x TEXT)")
        times = []
        for _ in range(n):
            t = time.perf_counter()
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO t VALUES (?)", ("x" * 2000,))
            db.execute("COMMIT")
            times.append((time.perf_counter() - t) * 1000)
        db.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return {
        "loadavg_1min": os.getloadavg()[0],
        "cpus": os.cpu_count(),
        "commit_ms_p50": round(pct(times, 50), 3),
        "commit_ms_p99": round(pct(times, 99), 3),
    }


def bench_nvml() -> list[dict[str, Any]]:
    """(e) Jobs visible as GPU processes through (fake) NVML, beside task-spooler: see
    bench/dispatch_nvml.py."""
    from dispatch_nvml import bench_nvml as run

    return run()


BENCHES: dict[str, Callable[[], Any]] = {
    "conditions": bench_conditions,
    "gap": bench_gap,
    "throughput": bench_throughput,
    "submit": bench_submit,
    "scale": bench_scale,
    "submits": bench_submits,
    "nvml": bench_nvml,
}


def main() -> int:
    which = sys.argv[1:] or ["all"]
    names = list(BENCHES) if which == ["all"] else which
    for name in names:
        result = BENCHES[name]()
        for row in result if isinstance(result, list) else [result]:
            print(json.dumps({"bench": name, **row}))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
