"""Start-up cost of `berth status` and `berth select` on 8 fake GPUs, against two baselines.

Usage (from the repository root):

    .venv/bin/python bench/startup.py [--rounds 40] [--procs 20] [--before PYTHON]

Everything runs with this interpreter, in interleaved rounds (so drift hits all alike):

- ``python -c pass``: the interpreter alone;
- floor: the least any NVML tool can do: import pynvml, nvmlInit, and for every GPU read
  memory, utilisation and compute processes;
- ``berth select`` and ``berth status`` (the installed console script, run by this
  interpreter; berth byte-compiled first, as an installed package is).

GPUs come from the fake ``libnvidia-ml.so.1`` of tests/fakenvml (built if needed): 8 GPUs
running ``--procs`` GPU processes between them (default 20, the shape of issue 35: real
processes, sleeping children of this bench, so that status looks up each one's user and
command; 3 on each of the first six GPUs, 2 on the seventh, the last idle for select). The order of the
commands alternates from round to round; the load average is printed before and after.
Prints medians and ratios, and the NVML calls each command makes per GPU (the fake library
counts them: ``$FAKE_NVML_CALLS``); targets: select <= 1.1x floor, status <= 1.3x floor
(issues 21, 35). Exit code 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "fakenvml"))

FLOOR = """\
import pynvml
pynvml.nvmlInit()
for i in range(pynvml.nvmlDeviceGetCount()):
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    pynvml.nvmlDeviceGetMemoryInfo(h)
    pynvml.nvmlDeviceGetUtilizationRates(h)
    pynvml.nvmlDeviceGetComputeRunningProcesses(h)
"""

TARGETS = {"berth select": 1.1, "berth status": 1.3}  # (issue 21)


def fake_state(pids: list[int], n: int = 8) -> dict[str, object]:
    """``n`` GPUs; ``pids`` dealt out in turn between all but the last (GPU 0 gets the 1st,
    8th, ...), which stays idle for `berth select` to choose."""
    gpus = []
    for i in range(n):
        mine = pids[i :: n - 1] if i < n - 1 else []
        procs = [{"pid": pid, "used_memory": 10 << 30, "type": "compute"} for pid in mine]
        gpus.append(
            {
                "uuid": f"GPU-bench{i:03d}-0000-0000-0000-{i:012d}",
                "name": "NVIDIA A100-SXM4-80GB",
                "pci_bus_id": f"00000000:{0x07 + 8 * i:02X}:00.0",
                "memory_total": 80 << 30,
                "memory_used": len(procs) * (10 << 30),
                "util": 50 if procs else 0,
                "mem_util": 20 if procs else 0,
                "power_mw": 60000,
                "power_limit_mw": 400000,
                "temp": 35,
                "pstate": 0,
                "processes": procs,
                "errors": {},
            }
        )
    return {"driver": "550.54.15", "cuda": 12040, "errors": {}, "gpus": gpus}


def berth_command() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "berth")
    if os.path.exists(script):
        return [sys.executable, script]
    return [sys.executable, "-m", "berth.cli.main"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40, help="repetitions of each command")
    ap.add_argument("--procs", type=int, default=20, help="GPU processes on the 8 GPUs")
    ap.add_argument(
        "--before",
        metavar="PYTHON",
        help="also `berth status` of the environment of this interpreter (another checkout's "
        "berth installed in it: a before/after in the same rounds)",
    )
    args = ap.parse_args()
    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(args.procs)]
    try:
        return measure(args, [p.pid for p in sleepers])
    finally:
        for p in sleepers:
            p.kill()
            p.wait()


def calls_per_gpu(cmd: list[str], env: dict[str, str], tmp: str, gpus: int = 8) -> float:
    """The NVML calls one run of ``cmd`` makes about a GPU, per GPU."""
    path = os.path.join(tmp, "calls")
    open(path, "w").close()
    subprocess.run(cmd, env={**env, "FAKE_NVML_CALLS": path}, stdout=subprocess.DEVNULL,
                   check=True)  # fmt: skip
    with open(path) as f:
        names = [line.split()[0] for line in f if line.strip()]
    per_gpu = [n for n in names if n.startswith("nvmlDevice") and "GetCount" not in n]
    return len(per_gpu) / gpus


def measure(args: argparse.Namespace, pids: list[int]) -> int:
    from build import build  # tests/fakenvml/build.py

    lib_dir = build()
    tmp = tempfile.mkdtemp(prefix="berth-bench-")
    state = os.path.join(tmp, "nvml.json")
    with open(state, "w") as f:
        json.dump(fake_state(pids), f)
    floor = os.path.join(tmp, "floor.py")
    with open(floor, "w") as f:
        f.write(FLOOR)
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": lib_dir,
        "FAKE_NVML_STATE": state,
        "FAKE_NVML_PROCS": os.path.join(tmp, "procs"),
        "BERTH_CONFIG": "",
        "BERTH_CLAIMS_DIR": os.path.join(tmp, "claims"),
        "BERTH_STATE_DIR": os.path.join(tmp, "state"),
    }
    env.pop("CUDA_VISIBLE_DEVICES", None)
    # Measure an installed berth: its modules byte-compiled, as pip leaves them (a
    # PYTHONDONTWRITEBYTECODE=1 shell would otherwise recompile every module on every run).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    import berth

    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", os.path.dirname(berth.__file__)],
        env=env,
        check=False,
    )
    berth = berth_command()
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "floor (pynvml)": [sys.executable, floor],
        "berth select": [*berth, "select"],
        "berth status": [*berth, "status"],
    }
    if args.before:
        before = os.path.join(os.path.dirname(args.before), "berth")
        commands["status (before)"] = [args.before, before, "status"]
    for name, cmd in commands.items():  # warm up, and check that each works
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            sys.stderr.write(f"{name} failed ({r.returncode}): {r.stderr}")
            return 2
    with open("/proc/loadavg") as f:
        load_before = f.read().strip()
    calls = {name: calls_per_gpu(cmd, env, tmp) for name, cmd in commands.items()}
    times: dict[str, list[float]] = {name: [] for name in commands}
    for k in range(args.rounds):
        order = list(commands.items())
        for name, cmd in order if k % 2 == 0 else order[::-1]:
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
            times[name].append(time.perf_counter() - t0)

    med = {name: statistics.median(ts) for name, ts in times.items()}
    base, flo = med["python -c pass"], med["floor (pynvml)"]
    with open("/proc/loadavg") as f:
        load_after = f.read().strip()
    print(
        f"{sys.executable} ({sys.version.split()[0]}), 8 fake GPUs, {len(pids)} GPU "
        f"processes, {args.rounds} rounds; load before {load_before}, after {load_after}"
    )
    print(f"{'command':<16} {'median':>9} {'x pass':>7} {'x floor':>8} {'NVML/GPU':>9}  target")
    ok = True
    for name, m in med.items():
        target = TARGETS.get(name)
        mark = ""
        if target is not None:
            met = m / flo <= target
            ok = ok and met
            mark = f"<= {target}x  {'ok' if met else 'MISSED'}"
        print(
            f"{name:<16} {m * 1000:7.1f}ms {m / base:6.2f}x {m / flo:7.2f}x "
            f"{calls[name]:9.1f}  {mark}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
