"""Submit -> the job's first output line on an idle GPU, as users run it, beside task-spooler
in the same run (issue 35).

Usage (from the repository root):

    .venv/bin/python bench/first_line.py [--rounds 30]

One daemon (this checkout's) sees 8 idle GPUs through the fake NVML of tests/fakenvml; one
task-spooler server (its own socket and TMPDIR, as bench/peers.py runs it) has 8 slots. Each
shape's time runs from starting the first command to reading ``hi`` on its stdout (a pipe):

- ``berth submit -i -- echo hi``: submit and stream the job's output (the installed console
  script, run by this interpreter);
- ``berth submit --parsable -- echo hi``, then ``berth logs -f JOB``;
- the daemon alone: a submit sent from this process, to the job running (``date +%s.%N``
  stamps when it ran): its commit, the supervisor's start of the job, the exec;
- ``python -c "print('hi')"``: the interpreter's own start, the floor of any Python client;
- ``tsp -f -n echo hi``: task-spooler's submit that waits in the terminal, output to it
  (``tsp echo hi`` then ``tsp -c JOB`` is no shape to time: ``-c`` of a job that has not
  started yet fails at once, exit code 255).

The order of the shapes alternates from round to round; prints p50 and p90 of each, the
CPU time of its client processes (user + system: less moved by the load than wall time),
the ratio of berth's to task-spooler's in the same run, and the load average before and
after.
Target: berth's submit -> first line <= 30 ms. Measure berth as users install it (`pip install
.` into a venv, and run this file with that venv's python): an editable install (`pip install
-e`, the repository's .venv) adds ~11 ms to every Python start there (setuptools' import
finder), to berth's shapes and to ``python -c`` alike (bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from daemon_bench import Daemon
from dispatch_nvml import fake_nvml, tsp_binary
from peers import Tsp
from startup import berth_command


def _first_line(argv: list[str], env: dict[str, str], t0: float) -> tuple[float, float]:
    """Run ``argv`` to its end: (seconds from ``t0`` to its first line on stdout, "hi"; its
    CPU seconds, user + system, less moved by the machine's load than wall time)."""
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert p.stdout is not None
    line = p.stdout.readline()
    t = time.perf_counter() - t0
    p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    assert status == 0 and line == b"hi\n", (argv, status, line)
    return t, usage.ru_utime + usage.ru_stime


def _run_out(argv: list[str], env: dict[str, str]) -> tuple[str, float]:
    """(stdout, CPU seconds) of ``argv``."""
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert p.stdout is not None
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    assert status == 0, (argv, status)
    return out.decode().strip(), usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    tsp_bin = tsp_binary()
    if tsp_bin is None:
        sys.stderr.write("task-spooler not found (apt-get install task-spooler)\n")
        return 2
    with open("/proc/loadavg") as f:
        load_before = f.read().strip()
    tmp = tempfile.mkdtemp(prefix="bench-first-")
    d = Daemon(gpus=8, nvml_env=fake_nvml(tmp, 8))
    tsp = Tsp(tsp_bin, 8)
    berth = berth_command()
    env = {k: v for k, v in d.env.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def submit_i() -> tuple[float, float]:
        return _first_line([*berth, "submit", "-i", "--", "echo", "hi"], env, time.perf_counter())

    def submit_logs() -> tuple[float, float]:
        t0 = time.perf_counter()
        job, cpu = _run_out([*berth, "submit", "--parsable", "--", "echo", "hi"], env)
        t, cpu_logs = _first_line([*berth, "logs", "-f", job], env, t0)
        return t, cpu + cpu_logs

    def tsp_f() -> tuple[float, float]:
        return _first_line([tsp.bin, "-f", "-n", "echo", "hi"], tsp.env, time.perf_counter())

    def python_print() -> tuple[float, float]:
        argv = [sys.executable, "-c", "print('hi')"]
        return _first_line(argv, env, time.perf_counter())

    def daemon_alone() -> tuple[float, float]:
        """The daemon's part: from sending the submit (this process's client) to the job
        running (``date`` stamps the time it ran); no client process to start."""
        t0 = time.time()
        reply = d.call("submit", job=d.job(["date", "+%s.%N"]))
        d.call("wait", job_id=reply["job_id"], timeout=30)
        with open(reply["stdout"]) as f:
            return float(f.read()) - t0, 0.0

    shapes = {
        "daemon: submit -> runs": daemon_alone,
        "python -c print('hi')": python_print,
        "berth submit -i": submit_i,
        "berth submit; logs -f": submit_logs,
        "tsp -f -n": tsp_f,
    }
    times: dict[str, list[float]] = {name: [] for name in shapes}
    cpus: dict[str, list[float]] = {name: [] for name in shapes}
    try:
        for fn in shapes.values():  # warm up (byte-compiled modules, the servers' first job)
            fn()
        for k in range(args.rounds):
            order = list(shapes.items())
            for name, fn in order if k % 2 == 0 else order[::-1]:
                t, cpu = fn()
                times[name].append(t)
                cpus[name].append(cpu)
    finally:
        tsp.stop()
        d.stop()
    with open("/proc/loadavg") as f:
        load_after = f.read().strip()
    print(f"submit -> first output line, idle GPU (8 fake GPUs; tsp: 8 slots), {args.rounds} "
          f"rounds; load before {load_before}, after {load_after}")  # fmt: skip
    p50 = {name: statistics.median(ts) * 1000 for name, ts in times.items()}
    for name, ts in times.items():
        ms = sorted(t * 1000 for t in ts)
        cpu = statistics.median(cpus[name]) * 1000
        print(f"{name:<22} p50 {p50[name]:6.1f} ms  p90 {ms[int(0.9 * (len(ms) - 1))]:6.1f} ms  "
              f"client CPU p50 {cpu:5.1f} ms")  # fmt: skip
    tsp_p50 = p50["tsp -f -n"]
    print(f"over tsp -f -n: submit -i {p50['berth submit -i'] / tsp_p50:.2f}x, submit; logs -f "
          f"{p50['berth submit; logs -f'] / tsp_p50:.2f}x")  # fmt: skip
    return 0 if p50["berth submit -i"] <= 30 else 1


if __name__ == "__main__":
    sys.exit(main())
