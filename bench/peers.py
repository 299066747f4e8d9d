"""berth beside its peers, in one run (issue 21.3). From the repository root:

    .venv/bin/python bench/peers.py [--rounds 3] [--sgs PATH] [--gflow DIR] [--berth PATH]

Peers (each measured where it can do the thing, skipped with the reason where it is absent):

- task-spooler (Debian's ``task-spooler``, binary ``tsp`` or ``ts``; no GPU support: as many
  slots as GPUs), run with its own socket and ``TMPDIR``;
- simple-gpu-scheduler (PyPI, ``--sgs``: its ``simple_gpu_scheduler`` script), which has no
  queue and no submit: one process reads the commands on its stdin and runs each on a free
  GPU (a thread and ``sh -c`` each); so only the throughput;
- gflow (PyPI ``runqd``, ``--gflow``: the folder of its ``gflowd``, ``gbatch``, ``gqueue``),
  with its daemon in a home of its own (``HOME``, XDG folders, ``TMUX_TMPDIR``: it runs each
  job in a tmux session) on a free loopback port, seeing 8 GPUs through the fake NVML
  library of tests/fakenvml (it loads ``libnvidia-ml.so.1`` as berth does).

Three figures, ``--rounds`` rounds each, the peers interleaved within a round, with
``/proc/loadavg`` before each figure:

1. submit latency of one trivial job, whole process, as a ratio to ``python -c pass`` (the
   same interpreter as berth's): ``berth submit --hold -- true``, ``tsp true`` (behind a
   job holding every slot), ``gbatch --gpus 1 --begin now+1d true`` (held by its begin time);
   median of ``--submits`` runs a round, interleaved with the baseline;
2. throughput: ``--jobs`` trivial one-GPU jobs (``true``) on 8 GPUs, first submit to last
   end: berth in each shape people submit in (``berth_throughput``: pipelined over one
   connection with a minimal spec, bench/daemon_bench.py's; and as the CLI sends them, with
   this process's whole environment: one ``--array``, one ``--file``, and ``--single-jobs``
   ``berth submit`` processes), each shape and peer once a round in an order that rotates
   by round, the load average before each run; simple-gpu-scheduler
   with the jobs on its stdin, task-spooler with one ``tsp`` process a job (it has no bulk
   submit) and a last job needing all 8 slots as the barrier; gflow with ``--gflow-jobs``
   jobs only, one ``gbatch`` each (it starts ~1 job a second: a tmux session each);
3. the queue listing with ``--queued`` jobs waiting behind 8 running ones, whole process,
   output to /dev/null: ``berth queue``, ``tsp -l`` (900 queued: it cannot hold more),
   ``gqueue``; and the resident memory of berth's daemon and of ``gflowd`` with that queue.

Prints one JSON line per figure and round, then a summary line with the ratios of each figure
and round: submit, x ``python -c pass``; throughput, berth's jobs/s over the peer's
(above 1: berth is faster); listing, berth's seconds over the peer's (above 1: slower).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from daemon_bench import Daemon  # noqa: E402
from dispatch_nvml import fake_nvml, tsp_binary  # noqa: E402

GPUS = 8
NULL = subprocess.DEVNULL
TSP_QUEUED = 900  # the most task-spooler can hold queued (see listing)


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def timed(argv: list[str], env: dict[str, str], stdin: bytes | None = None) -> float:
    """Seconds for one whole process, output discarded; it must succeed."""
    t = time.perf_counter()
    subprocess.run(argv, env=env, input=stdin, stdout=NULL, stderr=NULL, check=True)
    return time.perf_counter() - t


class Tsp:
    """A task-spooler server of its own (its socket and output files in a temporary folder)."""

    def __init__(self, binary: str, slots: int) -> None:
        self.bin = binary
        self.dir = tempfile.mkdtemp(prefix="bp-tsp-")
        self.env = {**os.environ, "TS_SOCKET": os.path.join(self.dir, "ts.sock"),
                    "TS_SLOTS": str(slots), "TMPDIR": self.dir, "TS_MAXFINISHED": "100000"}  # fmt: skip
        self.blocker = ""

    def add(self, *argv: str) -> str:
        out = subprocess.run([self.bin, *argv], env=self.env, capture_output=True, check=True)
        return out.stdout.decode().strip()

    def block(self) -> None:
        """A job holding every slot (the jobs added after it wait)."""
        self.blocker = self.add("-N", self.env["TS_SLOTS"], "sleep", "3600")

    def stop(self) -> None:
        if self.blocker:  # (-K leaves a running job and its runner behind)
            subprocess.run([self.bin, "-k", self.blocker], env=self.env, stdout=NULL,
                           stderr=NULL, check=False)  # fmt: skip
        subprocess.run([self.bin, "-K"], env=self.env, stdout=NULL, stderr=NULL, check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


class GFlow:
    """A gflow daemon in a home of its own, seeing GPUS GPUs through the fake NVML."""

    def __init__(self, bindir: str) -> None:
        self.bin = bindir
        self.dir = tempfile.mkdtemp(prefix="bp-gflow-")
        home = os.path.join(self.dir, "home")
        os.makedirs(os.path.join(home, "run"))
        os.makedirs(os.path.join(home, "tmux"))
        # Its jobs' tmux shells must find `gcancel` (how a job says it ended): no login shell.
        with open(os.path.join(home, ".tmux.conf"), "w") as f:
            f.write('set -g default-command "exec bash --noprofile --norc"\n')
        self.env = {
            **os.environ, **fake_nvml(self.dir, GPUS), "HOME": home,
            "XDG_CONFIG_HOME": os.path.join(home, ".config"),
            "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
            "XDG_STATE_HOME": os.path.join(home, ".local", "state"),
            "XDG_RUNTIME_DIR": os.path.join(home, "run"),
            "TMUX_TMPDIR": os.path.join(home, "tmux"),
            "PATH": bindir + os.pathsep + os.environ["PATH"],
        }  # fmt: skip
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.run("gflowd", "init", "--yes", "--port", str(port))
        self.run("gflowd", "up")
        deadline = time.monotonic() + 30
        while "8 total" not in self.run("gflowd", "status", check=False):
            if time.monotonic() > deadline:
                raise SystemExit("gflowd did not start with 8 GPUs; see " + self.dir)
            time.sleep(0.1)

    def run(self, tool: str, *args: str, check: bool = True) -> str:
        out = subprocess.run([os.path.join(self.bin, tool), *args], env=self.env,
                             stdin=NULL, capture_output=True, check=check, timeout=120)  # fmt: skip
        return out.stdout.decode()

    def argv(self, tool: str, *args: str) -> list[str]:
        return [os.path.join(self.bin, tool), *args]

    def states(self) -> list[str]:
        rows = json.loads(self.run("gqueue", "-a", "-o", "json"))["jobs"]
        return [str(r["state"]) for r in rows]

    def stop(self) -> None:
        self.run("gflowd", "down", check=False)
        subprocess.run(["tmux", "kill-server"], env=self.env, stdout=NULL, stderr=NULL,
                       check=False)  # fmt: skip
        shutil.rmtree(self.dir, ignore_errors=True)


# -- 1. submit latency ----------------------------------------------------------------------


def submit_round(a: argparse.Namespace, peers: dict[str, Any]) -> dict[str, Any]:
    d = Daemon(GPUS)
    tsp = gf = None
    try:
        argvs: dict[str, tuple[list[str], dict[str, str]]] = {
            "python_pass": ([a.python, "-c", "pass"], d.env),
            "berth": ([a.berth, "submit", "--hold", "--", "true"], d.env),
        }
        if peers["tsp"]:
            tsp = Tsp(peers["tsp"], GPUS)
            tsp.block()  # every slot busy: submits queue
            argvs["tsp"] = ([tsp.bin, "true"], tsp.env)
        if peers["gflow"]:
            gf = GFlow(peers["gflow"])
            argvs["gflow"] = (gf.argv("gbatch", "--gpus", "1", "--begin", "now+1d", "true"),
                              gf.env)  # fmt: skip
        times: dict[str, list[float]] = {k: [] for k in argvs}
        for _ in range(a.submits):
            for name, (argv, env) in argvs.items():
                times[name].append(timed(argv, env) * 1000)
    finally:
        d.stop()
        for peer in (tsp, gf):
            if peer is not None:
                peer.stop()
    ms = {k: round(statistics.median(v), 2) for k, v in times.items()}
    row: dict[str, Any] = {"ms": ms}
    row["x_python_pass"] = {k: round(v / ms["python_pass"], 2) for k, v in ms.items()}
    return row


# -- 2. throughput --------------------------------------------------------------------------


def berth_throughput(n: int, shape: str = "pipelined", berth: str = "") -> float:
    """``n`` trivial one-GPU jobs, first submit to last end, in one of berth's shapes:
    ``pipelined`` (the bench's one connection, a minimal spec), or as the CLI sends them,
    each carrying this process's whole environment (``--export ALL``, the default):
    ``array`` (one ``berth submit --array 0-(n-1)``), ``file`` (one ``berth submit --file``
    of ``n`` lines), ``single`` (``n`` ``berth submit`` processes, one after the other)."""
    d = Daemon(GPUS)
    try:
        t = time.perf_counter()
        if shape == "pipelined":
            d.submit_many([d.job(["true"], gpus=1) for _ in range(n)])
        elif shape == "array":
            timed([berth, "submit", "-g", "1", "--array", f"0-{n - 1}", "--", "true"], d.env)
        elif shape == "file":
            lines = os.path.join(d.dir, "jobs.txt")
            with open(lines, "w") as f:
                f.write("-g 1 -- true\n" * n)
            t = time.perf_counter()  # (the file written before the clock: as a user has it)
            timed([berth, "submit", "--file", lines], d.env)
        else:
            for _ in range(n):
                timed([berth, "submit", "-g", "1", "--", "true"], d.env)
        d.wait_idle(max(r["id"] for r in d.call("queue", all=True)["jobs"]))
        seconds = time.perf_counter() - t
        rows = d.call("queue", all=True)["jobs"]
        done = sum(r["state"] == "COMPLETED" for r in rows)
    finally:
        d.stop()
    assert done == n, f"berth ({shape}): {done} of {n} jobs completed"
    return n / seconds


def sgs_throughput(sgs: str, n: int) -> float:
    gpus = ",".join(str(i) for i in range(GPUS))
    return n / timed([sgs, "--gpus", gpus], dict(os.environ), b"true\n" * n)


def tsp_throughput(binary: str, n: int) -> float:
    tsp = Tsp(binary, GPUS)
    try:
        t = time.perf_counter()
        for _ in range(n):
            subprocess.run([binary, "true"], env=tsp.env, stdout=NULL, check=True)
        last = tsp.add("-N", str(GPUS), "true")  # runs once all before it have ended
        subprocess.run([binary, "-w", last], env=tsp.env, stdout=NULL, check=False)
        seconds = time.perf_counter() - t
    finally:
        tsp.stop()
    return (n + 1) / seconds


def gflow_throughput(bindir: str, n: int) -> float:
    gf = GFlow(bindir)
    try:
        t = time.perf_counter()
        for _ in range(n):  # (an --array of them stalls after the first 8 in 0.4.18)
            gf.run("gbatch", "--gpus", "1", "true")
        deadline = t + 600
        while True:
            states = gf.states()
            if len(states) == n and all(s in ("Finished", "Failed") for s in states):
                break
            if time.perf_counter() > deadline:
                raise SystemExit(f"gflow: jobs not done in 600 s: {states[:5]}")
            time.sleep(0.2)
        seconds = time.perf_counter() - t
        assert states.count("Finished") == n, f"gflow: {states.count('Finished')} of {n}"
    finally:
        gf.stop()
    return n / seconds


def throughput_round(a: argparse.Namespace, peers: dict[str, Any], r: int) -> dict[str, Any]:
    """Every shape and peer once, in an order that rotates by round (``r``), with the load
    average before each run; then berth's rate in each shape over each peer's."""
    runs: dict[str, Callable[[], float]] = {
        "berth_pipelined": lambda: berth_throughput(a.jobs),
        "berth_array": lambda: berth_throughput(a.jobs, "array", a.berth),
        "berth_file": lambda: berth_throughput(a.jobs, "file", a.berth),
    }
    if a.single_jobs:
        runs["berth_single"] = lambda: berth_throughput(a.single_jobs, "single", a.berth)
    if peers["sgs"]:
        runs["sgs"] = lambda: sgs_throughput(peers["sgs"], a.jobs)
    if peers["tsp"]:
        runs["tsp"] = lambda: tsp_throughput(peers["tsp"], a.jobs)
    if peers["gflow"]:
        runs["gflow"] = lambda: gflow_throughput(peers["gflow"], a.gflow_jobs)
    names = list(runs)
    order = names[r % len(names) :] + names[: r % len(names)]
    rate, loads = {}, {}
    for name in order:
        loads[name] = load()
        rate[name] = runs[name]()
    row: dict[str, Any] = {"order": order, "loadavg": loads}
    row["jobs_per_second"] = {k: round(rate[k], 1) for k in names}
    row["berth_rate_ratio"] = {
        f"{b.removeprefix('berth_')}/{p}": round(rate[b] / rate[p], 2)
        for b in names if b.startswith("berth_")
        for p in names if not p.startswith("berth_")
    }  # fmt: skip
    return row


# -- 3. queue listing -----------------------------------------------------------------------


def listing(a: argparse.Namespace, peers: dict[str, Any]) -> list[dict[str, Any]]:
    """Fill each queue once, then time the listings, interleaved, ``a.rounds`` times."""
    n = a.queued
    d = Daemon(GPUS)
    tsp = gf = None
    rows = []
    try:
        d.submit_many([d.job(["sleep", "3600"], gpus=1) for _ in range(GPUS)])
        d.submit_many([d.job(["true"], gpus=1) for _ in range(n)])
        argvs = {"berth": ([a.berth, "queue"], d.env)}
        if peers["tsp"]:
            tsp = Tsp(peers["tsp"], GPUS)
            tsp.block()
            # Each queued job is a waiting `tsp` process and the server takes ~1,000 at once
            # (the 1,000th submit blocks): task-spooler lists TSP_QUEUED.
            for _ in range(min(n, TSP_QUEUED)):
                subprocess.run([tsp.bin, "true"], env=tsp.env, stdout=NULL, check=True)
            argvs["tsp"] = ([tsp.bin, "-l"], tsp.env)
        if peers["gflow"]:
            gf = GFlow(peers["gflow"])
            for _ in range(GPUS):
                gf.run("gbatch", "--gpus", "1", "sleep", "3600")
            for first in range(1, n + 1, 1000):  # (a request body holds ~1,000 at most)
                last = min(n, first + 999)
                gf.run("gbatch", "--array", f"{first}-{last}", "--gpus", "1", "true")
            argvs["gflow"] = (gf.argv("gqueue"), gf.env)
        for r in range(a.rounds):
            before = load()
            seconds = {k: round(timed(argv, env), 3) for k, (argv, env) in argvs.items()}
            row: dict[str, Any] = {"round": r + 1, "loadavg": before, "seconds": seconds}
            # the daemons' memory with that queue (after this round's listing)
            row["daemon_rss_mb"] = {"berth": round(d.call("ping")["rss"] / 2**20, 1)}
            if gf is not None:
                row["daemon_rss_mb"]["gflow"] = rss_mb("gflow")  # (gflowd runs as `gflow __multicall gflowd`)
            row["berth_time_ratio"] = {k: round(seconds["berth"] / v, 2) for k, v in seconds.items()
                              if k != "berth"}  # fmt: skip
            rows.append(row)
    finally:
        d.call("cancel", all_mine=True)
        d.stop()
        for peer in (tsp, gf):
            if peer is not None:
                peer.stop()
    return rows


def rss_mb(comm: str) -> float | None:
    """The resident memory (MB) of the process named ``comm`` (the newest, if several)."""
    best: tuple[int, float] | None = None
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/comm") as f:
                if f.read().strip() != comm:
                    continue
            with open(f"/proc/{name}/statm") as f:
                pages = int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if best is None or int(name) > best[0]:
            best = (int(name), pages * os.sysconf("SC_PAGE_SIZE") / 2**20)
    return None if best is None else round(best[1], 1)


def find_peers(a: argparse.Namespace) -> dict[str, Any]:
    sgs = a.sgs or shutil.which("simple_gpu_scheduler")
    gflow = a.gflow or (os.path.dirname(shutil.which("gflowd") or "") or None)
    found: dict[str, Any] = {
        "tsp": tsp_binary(),
        "sgs": sgs if sgs and os.access(sgs, os.X_OK) else None,
        "gflow": gflow if gflow and os.access(os.path.join(gflow, "gbatch"), os.X_OK) else None,
    }
    if found["gflow"] and not shutil.which("tmux"):
        found["gflow"] = None  # (it runs every job in a tmux session)
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    venv_bin = os.path.dirname(sys.executable)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--berth", default=os.path.join(venv_bin, "berth"),
                   help="berth's console script (its venv's python is the baseline)")  # fmt: skip
    p.add_argument("--sgs", help="simple-gpu-scheduler's simple_gpu_scheduler script")
    p.add_argument("--gflow", help="the folder of gflow's gflowd, gbatch, gqueue (runqd)")
    p.add_argument("--submits", type=int, default=20, help="submit runs a round")
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--gflow-jobs", type=int, default=40)
    p.add_argument("--single-jobs", type=int, default=200,
                   help="jobs in berth's single-submit shape (a process each; 0: not run)")  # fmt: skip
    p.add_argument("--queued", type=int, default=10_000)
    p.add_argument("--only", choices=["submit", "throughput", "queue"], action="append")
    a = p.parse_args()
    a.python = os.path.join(os.path.dirname(a.berth), "python")
    peers = find_peers(a)
    print(json.dumps({"peers": {k: v or "absent" for k, v in peers.items()}}), flush=True)
    summary: dict[str, Any] = {}
    figures = a.only or ["submit", "throughput", "queue"]
    for figure in figures:
        if figure == "queue":
            rows = listing(a, peers)
        else:
            rows = []
            for r in range(a.rounds):
                before = load()
                one = submit_round(a, peers) if figure == "submit" else throughput_round(a, peers, r)
                rows.append({"round": r + 1, "loadavg": before, **one})
                print(json.dumps({"figure": figure, **rows[-1]}), flush=True)
        if figure == "queue":
            for row in rows:
                print(json.dumps({"figure": figure, **row}), flush=True)
        key = {
            "submit": "x_python_pass",
            "throughput": "berth_rate_ratio",
            "queue": "berth_time_ratio",
        }[figure]
        summary[figure] = {k: [row[key].get(k) for row in rows] for k in rows[0][key]}
    print(json.dumps({"summary": summary, "loadavg_end": load()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
