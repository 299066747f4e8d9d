"""Dispatch with jobs visible as GPU processes (issue 10), berth beside task-spooler, in one run:

    .venv/bin/python bench/daemon_bench.py nvml      # or: .venv/bin/python bench/dispatch_nvml.py

The daemon reads GPUs through NVML (the fake ``libnvidia-ml.so.1`` of tests/fakenvml, over
the real pynvml path; the default poll interval, 5 s, or ``BENCH_POLL`` seconds), and every
job runs the fake GPU workload (tests/fakenvml/workload.py), which NVML lists as a process on
the GPU it was given, as a CUDA program would be. Two workloads: 40 x 0.5 s jobs on 4 GPUs, and 8 x 6 s jobs on 2 GPUs.

Each job is the same bash script under both schedulers: it stamps ``s <gpu> <time>`` (bash's
$EPOCHREALTIME, no fork), runs the workload, and stamps ``e <gpu> <time>``. A gap is the time
a GPU idles after a job's end while jobs wait: until the next start there (or the last start
anywhere, if none came there): the scheduler's whole reaction, without the workload's own
start-up. The makespan is the last end minus the first start.

task-spooler (Debian's ``task-spooler``, binary ``tsp`` or ``ts``, which has no GPU support)
runs the jobs with as many slots as GPUs (``TS_SLOTS``); the script takes the first GPU whose
lock file it can ``flock`` (a GPU per slot, released when the job ends) and sets
``CUDA_VISIBLE_DEVICES`` to it. Each job's output goes to a file under both (berth's log,
task-spooler's output file). Rounds alternate berth and task-spooler; ``BENCH_ROUNDS``
sets how many (default 2).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = os.path.join(ROOT, "tests", "fakenvml")
WORKLOAD = os.path.join(FAKE, "workload.py")

JOB = r"""#!/bin/bash
# job.sh STAMPS SECONDS [LOCKDIR NGPUS]: stamp, run the fake GPU workload, stamp.
stamps=$1 seconds=$2
if [ -n "$3" ]; then  # task-spooler: take a free GPU (one lock per GPU, held by the job)
    for ((g = 0; g < $4; g++)); do
        exec 9>"$3/$g"
        if flock -n 9; then export CUDA_VISIBLE_DEVICES=$g; break; fi
        exec 9>&-
    done
fi
echo "s $CUDA_VISIBLE_DEVICES $EPOCHREALTIME" >> "$stamps"
"$PYTHON" "$WORKLOAD" --seconds "$seconds" --mem 1G --util 90
echo "e $CUDA_VISIBLE_DEVICES $EPOCHREALTIME" >> "$stamps"
"""

WORKLOADS = [(40, 0.5, 4), (8, 6.0, 2)]  # (jobs, seconds each, GPUs)


def fake_nvml(root: str, gpus: int) -> dict[str, str]:
    """Build the fake NVML library, write ``gpus`` idle 80 GB GPUs; the environment to use."""
    spec = importlib.util.spec_from_file_location("fakenvml_build", os.path.join(FAKE, "build.py"))
    assert spec is not None and spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    lib_dir = build.build()
    state = os.path.join(root, "nvml.json")
    devices = []
    for i in range(gpus):
        h = hashlib.md5(f"bench-gpu-{i}".encode()).hexdigest()
        devices.append({
            "uuid": f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}",
            "name": "NVIDIA A100-SXM4-80GB", "pci_bus_id": f"00000000:{0x10 + i:02X}:00.0",
            "memory_total": 80 << 30, "memory_used": 0, "util": 0, "mem_util": 0,
            "power_mw": 60000, "power_limit_mw": 400000, "temp": 35, "pstate": 0,
            "processes": [],
        })  # fmt: skip
    with open(state, "w") as f:
        json.dump({"driver": "550.54.15", "cuda": 12040, "gpus": devices}, f)
    return {
        "LD_LIBRARY_PATH": lib_dir,
        "FAKE_NVML_STATE": state,
        "FAKE_NVML_PROCS": state + ".procs",
        "PYTHON": sys.executable,
        "WORKLOAD": WORKLOAD,
    }


def read_stamps(path: str) -> tuple[list[float], float, int]:
    """(gaps in ms, makespan in s, jobs ended) from a stamps file. A gap follows every end
    while jobs still wait (before the last start): until the next start on that GPU, or, if
    none came there, until the last start anywhere (the GPU idled while jobs waited)."""
    events: dict[str, list[tuple[float, str]]] = {}
    with open(path) as f:
        for line in f:
            kind, gpu, stamp = line.split()
            events.setdefault(gpu, []).append((float(stamp), kind))
    everything = sorted(e for seq in events.values() for e in seq)
    last_start = max(t for t, k in everything if k == "s")
    gaps = []
    for seq in events.values():
        seq.sort()
        for i, (t, kind) in enumerate(seq):
            if kind == "e" and t < last_start:
                later = [u for u, k in seq[i + 1 :] if k == "s"]
                gaps.append(((later[0] if later else last_start) - t) * 1000)
    ends = [t for t, k in everything if k == "e"]
    return gaps, max(ends) - everything[0][0], len(ends)


def run_berth(jobs: int, seconds: float, gpus: int, script: str) -> tuple[list[float], float]:
    from daemon_bench import Daemon  # (bench/ is on sys.path: this file's directory)

    tmp = tempfile.mkdtemp(prefix="bn-", dir="/tmp")
    try:
        env = fake_nvml(tmp, gpus)
        d = Daemon(gpus, nvml_env=env)
        try:
            stamps = os.path.join(d.dir, "stamps")
            job_env = {"PATH": os.environ["PATH"], **env}
            specs = [d.job(["bash", script, stamps, str(seconds)], gpus=1, env=job_env)
                     for _ in range(jobs)]  # fmt: skip
            ids = d.submit_many(specs)
            d.wait_all(ids)
            gaps, makespan, ended = read_stamps(stamps)
        finally:
            d.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert ended == jobs, f"berth: {ended} of {jobs} jobs ended"
    return gaps, makespan


def tsp_binary() -> str | None:
    for name in ("tsp", "ts"):
        path = shutil.which(name)
        if path and "spooler" in _version(path).lower():
            return path
    return None


def _version(path: str) -> str:
    out = subprocess.run(  # (moreutils' `ts` reads its input: give it none)
        [path, "-V"], stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
    )
    return out.stdout + out.stderr


def run_tsp(
    tsp: str, jobs: int, seconds: float, gpus: int, script: str
) -> tuple[list[float], float]:
    tmp = tempfile.mkdtemp(prefix="bt-", dir="/tmp")
    try:
        env = {
            **os.environ,
            **fake_nvml(tmp, gpus),
            "TS_SOCKET": os.path.join(tmp, "ts.sock"),
            "TS_SLOTS": str(gpus),
            "TMPDIR": tmp,
        }
        env.pop("CUDA_VISIBLE_DEVICES", None)
        locks = os.path.join(tmp, "locks")
        os.makedirs(locks)
        stamps = os.path.join(tmp, "stamps")
        ids = []
        for _ in range(jobs):
            out = subprocess.run(
                [tsp, "bash", script, stamps, str(seconds), locks, str(gpus)],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            ids.append(out.stdout.strip())
        for i in ids:
            subprocess.run([tsp, "-w", i], env=env, capture_output=True, check=False)
        subprocess.run([tsp, "-K"], env=env, capture_output=True, check=False)
        gaps, makespan, ended = read_stamps(stamps)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert ended == jobs, f"task-spooler: {ended} of {jobs} jobs ended"
    return gaps, makespan


def run_sgs(sgs: str, jobs: int, seconds: float, gpus: int, script: str) -> tuple[list[float], float]:
    """simple-gpu-scheduler: the same script on its stdin, one line a job; it sets
    ``CUDA_VISIBLE_DEVICES`` to the GPU it gives each line (no lock files needed)."""
    tmp = tempfile.mkdtemp(prefix="bs-", dir="/tmp")
    try:
        env = {**os.environ, **fake_nvml(tmp, gpus)}
        env.pop("CUDA_VISIBLE_DEVICES", None)
        stamps = os.path.join(tmp, "stamps")
        lines = "".join(f"bash {script} {stamps} {seconds}\n" for _ in range(jobs))
        subprocess.run(
            [sgs, "--gpus", ",".join(str(i) for i in range(gpus))], input=lines.encode(),
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
        )  # fmt: skip
        gaps, makespan, ended = read_stamps(stamps)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert ended == jobs, f"simple-gpu-scheduler: {ended} of {jobs} jobs ended"
    return gaps, makespan


def sgs_binary() -> str | None:
    """simple-gpu-scheduler's script: ``BENCH_SGS``, else on PATH."""
    path = os.environ.get("BENCH_SGS") or shutil.which("simple_gpu_scheduler")
    return path if path and os.access(path, os.X_OK) else None


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))]


def _figures(gaps: list[float], makespans: list[float]) -> dict[str, Any]:
    return {
        "gap_ms_p50": round(_pct(gaps, 50), 1),
        "gap_ms_p99": round(_pct(gaps, 99), 1),
        "gap_ms_max": round(max(gaps), 1),
        "makespan_s": round(statistics.median(makespans), 3),
    }


def bench_nvml() -> list[dict[str, Any]]:
    rounds = int(os.environ.get("BENCH_ROUNDS", "2"))
    tsp, sgs = tsp_binary(), sgs_binary()
    tmp = tempfile.mkdtemp(prefix="bj-", dir="/tmp")
    script = os.path.join(tmp, "job.sh")
    with open(script, "w") as f:
        f.write(JOB)
    out = []
    try:
        for jobs, seconds, gpus in WORKLOADS:
            runs: dict[str, tuple[list[float], list[float]]] = {"berth": ([], [])}
            if tsp:
                runs["tsp"] = ([], [])
            if sgs:
                runs["sgs"] = ([], [])
            loads = []
            for r in range(rounds):
                names = list(runs)
                order = names[r % len(names) :] + names[: r % len(names)]  # (alternating)
                loads.append(os.getloadavg()[0])
                for name in order:
                    gaps, spans = runs[name]
                    if name == "berth":
                        g, m = run_berth(jobs, seconds, gpus, script)
                    elif name == "tsp":
                        assert tsp is not None
                        g, m = run_tsp(tsp, jobs, seconds, gpus, script)
                    else:
                        assert sgs is not None
                        g, m = run_sgs(sgs, jobs, seconds, gpus, script)
                    gaps += g
                    spans.append(m)
            row: dict[str, Any] = {"jobs": jobs, "seconds": seconds, "gpus": gpus}
            row["rounds"] = rounds
            for name, (gaps, spans) in runs.items():
                row[name] = _figures(gaps, spans)
            for name in ("tsp", "sgs"):
                if name in runs:
                    row[f"makespan_ratio_{name}"] = round(
                        row["berth"]["makespan_s"] / row[name]["makespan_s"], 3
                    )
                    row[f"gap_p50_minus_{name}_ms"] = round(
                        row["berth"]["gap_ms_p50"] - row[name]["gap_ms_p50"], 1
                    )
            if not tsp:
                row["tsp"] = "not installed (apt-get install task-spooler)"
            if not sgs:
                row["sgs"] = "not found (BENCH_SGS=path of simple_gpu_scheduler)"
            row["loadavg_1min"] = loads
            out.append(row)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    for r in bench_nvml():
        print(json.dumps({"bench": "nvml", **r}))
