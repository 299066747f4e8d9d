"""2,000 trivial one-GPU jobs on 8 GPUs (``daemon_bench.py throughput``), or 20,000 pipelined
submits (``--bench submits``: ``daemon_bench.py submits``), an earlier revision of berth and
this checkout in each round (which goes first alternates), with simple-gpu-scheduler after
them if given, and where each job's CPU goes. Run from the repository root:

    .venv/bin/python bench/throughput_ab.py --base REV [--rounds 4] [--sgs PATH] [--logdir DIR]
    [BENCH_SUBMITS=100000] .venv/bin/python bench/throughput_ab.py --base REV --bench submits [--rounds 4]
    BENCH_JOBS=10000 .venv/bin/python bench/throughput_ab.py --base REV   # a longer queue
    BENCH_GPUS=16 .venv/bin/python bench/throughput_ab.py --base REV      # more GPUs (sgs too)
    .venv/bin/python bench/throughput_ab.py --base REV --shape file|array --sgs PATH

``--shape``: how the 2,000 jobs are submitted. ``submits`` (the default): 2,000 separate
submits pipelined on one connection, each a minimal spec (``daemon_bench.bench_throughput``).
``file``: one ``berth submit -g 1 --file JOBS`` of 2,000 lines (``true``); ``array``: one
``berth submit -g 1 --array 0-1999 -- true``; both through the tree's CLI in a process of its
own with the environment the bench runs in (a user's: PATH, HOME, ... each job's spec carries
it), timed from the CLI's start to the last end. simple-gpu-scheduler gets the same 2,000
commands on its stdin, as its users give them.

Each tree (``git archive`` of REV, and of HEAD: commit what you measure) runs in a process of
its own, in the tree's directory with PYTHONPATH on it, so the daemon (``python -m``, whose
sys.path starts with the directory it runs in), its fork server and the supervisors are that
tree's; the bench code is this checkout's for both. On a shared machine compare the two in
the same round (the load average is printed before each run), never absolute figures across
runs.

Per run: jobs/s, and CPU ms a job of the daemon (its threads), of the supervisors
(``berth-sup``, read before the daemon stops), of the jobs (the supervisors' reaped
children) and of the rest (the fork server): ``cpu_ms_per_job`` over the daemon's whole life
(its start-up and the bench's closing ``queue`` call included, as in earlier rows of
RESULTS.md), ``burst_cpu_ms_per_job`` over the burst alone (first submit to last end), the
daemon's event loop and its committer thread apart; ``machine``: the share of the machine's
CPU time left idle, and taken by niced processes (other sessions' suites), during the burst
(for simple-gpu-scheduler, during its run). A share left to niced processes is time berth
did not want: waiting, not computing. ``burst_cpu_ms_per_job``'s ``client``: what submitted
(the bench's sends, or the CLI process); ``cpu_ms_per_job_without_daemon``: the burst's CPU of
everything but the daemon (supervisors, jobs, fork server, client): what berth would cost with
a daemon that did nothing, beside simple-gpu-scheduler's ``cpu_ms_per_job`` (it and its jobs:
the bound berth works under on a CPU-bound machine). ``head_over_sgs``: the round's ratio. ``--logdir``: the jobs' logs there (``%j.out``)
instead of the bench's directory, to see what creating a log file costs on each filesystem.

``--keep``: every run's directory (its state, its 2,000 logs) is kept until the bench ends,
in a directory of its own under ``$BENCH_DIR`` (default /tmp). On an ext4 without a journal
(this machine's), a new inode skips every inode of its block group freed in the last 60 s
(300 s while the inode table's block is dirty): ``recently_deleted`` in the kernel, read
for each one skipped. A run that removes its logs as it stops makes each log the next run
creates there scan past them (w8-thru: 8 us a create in a fresh group, 29 us after 2,000
removals, 150-300 us in /tmp's groups churned by other sessions' test suites; ``perf``: a
third to a half of the supervisors' samples in ``ext4_create``). A state directory is not
emptied of thousands of files every few seconds: ``--keep`` leaves that to the bench's end.
A later bench within ~5 minutes in the same place still pays for it: give it another
``BENCH_DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WHICH = ["throughput", "submits"]  # the bench each run runs (--bench), its shape (--shape)

# One run, in a fresh interpreter whose sys.path starts with the tree to measure.
CHILD = r"""
import json, os, resource, subprocess, sys, time
tree, logdir, bench, which, shape = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
sys.path[:0] = [bench, tree]  # this checkout's bench, the tree's berth
import daemon_bench as db
db.ROOT = tree  # (the daemon runs in the tree's directory: its berth)
if which == "submits":
    print(json.dumps(db.bench_submits(int(os.environ.get("BENCH_SUBMITS", "20000")))))
    raise SystemExit(0)

def breakdown(d):
    tick = os.sysconf("SC_CLK_TCK")
    st = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    raw = f.read()
            except OSError:
                continue
            comm = raw.split(b"(", 1)[1].rsplit(b")", 1)[0]
            x = raw.rsplit(b")", 1)[1].split()
            st[int(name)] = (int(x[1]), comm, (int(x[11]) + int(x[12])) / tick,
                             (int(x[13]) + int(x[14])) / tick)
    out = {"daemon": st[d.proc.pid][2], "supervisors": 0.0, "jobs": 0.0, "other": 0.0}
    todo = [p for p, v in st.items() if v[0] == d.proc.pid]
    while todo:
        p = todo.pop()
        _, comm, own, kids = st[p]
        if comm == b"berth-sup":
            out["supervisors"] += own
            out["jobs"] += kids
        else:
            out["other"] += own
        todo += [q for q, v in st.items() if v[0] == p]
    return out

def threads(pid):
    tick, out = os.sysconf("SC_CLK_TCK"), {}
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/stat", "rb") as f:
            x = f.read().rsplit(b")", 1)[1].split()
        out["loop" if int(t) == pid else "committer"] = out.get(
            "loop" if int(t) == pid else "committer", 0.0) + (int(x[11]) + int(x[12])) / tick
    return out

def machine():
    with open("/proc/stat") as f:
        return [int(v) for v in f.readline().split()[1:]]

stop = db.Daemon.stop
cpu, burst = {}, {}
def stop_(self):
    cpu.update(breakdown(self))
    stop(self)
db.Daemon.stop = stop_
# The burst alone (first submit -> last end): what the daemon's start-up and the bench's
# closing `queue` call cost stays out of it.
submit_many, wait_idle = db.Daemon.submit_many, db.Daemon.wait_idle
def submit_many_(self, jobs):
    burst["before"] = (breakdown(self), threads(self.proc.pid), machine())
    return submit_many(self, jobs)
def wait_idle_(self, job_id):
    r = wait_idle(self, job_id)
    burst["after"] = (breakdown(self), threads(self.proc.pid), machine())
    return r
db.Daemon.submit_many, db.Daemon.wait_idle = submit_many_, wait_idle_
client = [0.0]  # CPU seconds of what submitted (the bench's pipelined sends, or the CLI)
def cpu_of(who):
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime
def submits(self, jobs):
    burst["before"] = (breakdown(self), threads(self.proc.pid), machine())
    c0 = cpu_of(resource.RUSAGE_SELF)
    try:
        return submit_many(self, jobs)
    finally:
        client[0] = cpu_of(resource.RUSAGE_SELF) - c0
db.Daemon.submit_many = submits
def cli_shape(n, gpus):
    # `berth submit --file` of n lines, or one `--array 0-(n-1)`, as a user types it: the
    # tree's CLI in a process of its own, with the environment the bench runs in.
    d = db.Daemon(gpus=gpus)
    try:
        if shape == "file":
            path = os.path.join(d.dir, "jobs.txt")
            with open(path, "w") as f:
                f.write("true\n" * n)
            argv = ["submit", "-g", "1", "--file", path]
        else:
            argv = ["submit", "-g", "1", "--array", f"0-{n - 1}", "--", "true"]
        if logdir:
            argv[1:1] = ["-o", os.path.join(logdir, "%j.out")]
        burst["before"] = (breakdown(d), threads(d.proc.pid), machine())
        c0, t0 = cpu_of(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run([sys.executable, "-m", "berth.cli.main", *argv], env=d.env, cwd=tree,
                       check=True, stdout=subprocess.DEVNULL)
        client[0] = cpu_of(resource.RUSAGE_CHILDREN) - c0
        wait_idle(d, n)  # (a fresh daemon: its jobs are 1..n)
        total = time.perf_counter() - t0
        burst["after"] = (breakdown(d), threads(d.proc.pid), machine())
        rows = d.call("queue", all=True)["jobs"]
        if len(rows) != n or max(r["id"] for r in rows) != n:
            raise SystemExit(f"expected jobs 1..{n}, got {len(rows)} rows")
        ok = sum(r["state"] == "COMPLETED" for r in rows)
    finally:
        d.stop()
    return {"jobs": n, "completed": ok, "jobs_per_second": round(n / total, 1)}
if logdir:
    job = db.Daemon.job
    def job_(self, argv=None, **extra):
        return {**job(self, argv, **extra), "stdout": os.path.join(logdir, "%j.out")}
    db.Daemon.job = job_
n, g = int(os.environ.get("BENCH_JOBS", "2000")), int(os.environ.get("BENCH_GPUS", "8"))
r = db.bench_throughput(n, g) if shape == "submits" else cli_shape(n, g)
(b0, t0, m0), (b1, t1, m1) = burst["before"], burst["after"]
inb = {f"daemon_{k}": v - t0.get(k, 0.0) for k, v in t1.items()}
inb.update({k: b1[k] - b0.get(k, 0.0) for k in ("supervisors", "jobs", "other")})
inb["client"] = client[0]
# What berth would cost with a daemon that did nothing: every other process of it, the
# submitting client included (beside sgs's whole CPU a job: the bound the daemon works under).
rest = sum(v for k, v in inb.items() if not k.startswith("daemon_"))
dm = [b - a for a, b in zip(m0, m1)]
print(json.dumps({"shape": shape, "jobs_per_second": r["jobs_per_second"], "completed": r["completed"],
                  "cpu_ms_per_job": {k: round(v / n * 1000, 3) for k, v in cpu.items()},
                  "burst_cpu_ms_per_job": {k: round(v / n * 1000, 3) for k, v in inb.items()},
                  "cpu_ms_per_job_without_daemon": round(rest / n * 1000, 3),
                  "machine": {"idle": round(dm[3] / sum(dm), 3), "nice": round(dm[1] / sum(dm), 3)}}))
"""


def export(rev: str, into: str) -> str:
    os.makedirs(into)
    archive = subprocess.run(
        ["git", "-C", ROOT, "archive", rev, "berth", "bench"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return into


def one(tree: str, logdir: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": tree}
    if logdir:
        with tempfile.TemporaryDirectory(dir=logdir) as d:
            return one_run(tree, d, env)
    return one_run(tree, "", env)


def one_run(tree: str, logdir: str, env: dict[str, str]) -> dict[str, Any]:
    # In the tree's directory: the daemon runs `python -m berth.cli.main`, whose sys.path
    # starts with the directory it runs in (so from this checkout, both sides would run it).
    out = subprocess.run(
        [sys.executable, "-c", CHILD, tree, logdir, os.path.join(ROOT, "bench"), WHICH[0], WHICH[1]],
        env=env, check=True, capture_output=True, text=True, cwd=tree,
    )  # fmt: skip
    row: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return row


def machine() -> list[int]:
    with open("/proc/stat") as f:
        return [int(v) for v in f.readline().split()[1:]]


def sgs(path: str, n: int = 2000) -> dict[str, Any]:
    """simple-gpu-scheduler given the ``n`` commands on its stdin, as its users give them;
    its CPU a job: it and every job it ran (reaped by it, then it by us)."""
    m0, t = machine(), time.perf_counter()
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [path, "--gpus", ",".join(str(i) for i in range(int(os.environ.get("BENCH_GPUS", "8"))))],
        input=b"true\n" * n, check=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    rate = round(n / (time.perf_counter() - t), 1)
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime
    dm = [b - a for a, b in zip(m0, machine(), strict=True)]
    share = {"idle": round(dm[3] / sum(dm), 3), "nice": round(dm[1] / sum(dm), 3)}
    return {"jobs_per_second": rate, "cpu_ms_per_job": round(cpu / n * 1000, 3), "machine": share}


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="the earlier revision (a commit)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--sgs", help="simple-gpu-scheduler's simple_gpu_scheduler script")
    p.add_argument("--logdir", default="", help="the jobs' logs in this directory")
    p.add_argument("--keep", action="store_true",
                   help="keep every run's directory until the bench ends (see the module)")
    p.add_argument("--bench", choices=("throughput", "submits"), default="throughput",
                   help="submits: 20,000 pipelined submits (daemon_bench.py submits) instead")  # fmt: skip
    p.add_argument("--shape", choices=("submits", "file", "array"), default="submits",
                   help="how the jobs are submitted: the bench's pipelined submits (a minimal "
                   "spec), or the CLI's `submit --file` of their lines, or one `--array`")  # fmt: skip
    a = p.parse_args()
    WHICH[:] = [a.bench, a.shape]
    if a.keep:  # (the runs' directories, removed once the bench ends)
        runs = tempfile.mkdtemp(prefix="berth-ab-runs-", dir=os.environ.get("BENCH_DIR"))
        os.environ.update(BENCH_DIR=runs, BENCH_KEEP="1")
        try:
            return _rounds(a)
        finally:
            shutil.rmtree(runs, ignore_errors=True)
    return _rounds(a)


def _rounds(a: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="berth-ab-") as tmp:
        trees = {"base": export(a.base, os.path.join(tmp, "base")),
                 "head": export("HEAD", os.path.join(tmp, "head"))}  # fmt: skip
        rate = "jobs_per_second" if a.bench == "throughput" else "submits_per_second"
        for r in range(a.rounds):
            row: dict[str, Any] = {"round": r + 1}
            # Each run leaves the next one a little behind (its thousands of files removed;
            # the load it raised): the order alternates, base first in odd rounds.
            for name in ("base", "head") if r % 2 == 0 else ("head", "base"):
                row[name] = {"loadavg": load(), **one(trees[name], a.logdir)}
            if a.sgs:
                row["sgs"] = {"loadavg": load(), **sgs(a.sgs, int(os.environ.get("BENCH_JOBS", "2000")))}
                for name in ("base", "head"):  # (the ratio a round is judged by)
                    row[f"{name}_over_sgs"] = round(row[name][rate] / row["sgs"][rate], 2)
            row["head_over_base"] = round(row["head"][rate] / row["base"][rate], 2)
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
