"""What `berth status` pays the NVIDIA driver for, call by call (issue 37, issue 35's status row).

    python3 bench/nvml_costs.py [--rounds 20]      # on a GPU machine (or with the fake library)

Prints, in one process: nvmlInit's time; each NVML call `berth status` makes per GPU, its
median over ``--rounds`` (microseconds); berth's whole read (``read_all()``, warm) against the
floor's four calls a GPU; then, as separate processes interleaved, `berth status`, the minimal
pynvml script and ``python -c pass`` (medians, ms), and where `berth status`'s own time goes
(``-X importtime``: the imports' total). The figures say whether the gap to the floor is NVML
calls, imports or berth's own work on this driver.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

MIN_NVML = (
    "import pynvml\npynvml.nvmlInit()\nfor i in range(pynvml.nvmlDeviceGetCount()):\n"
    "    h = pynvml.nvmlDeviceGetHandleByIndex(i)\n    pynvml.nvmlDeviceGetName(h)\n"
    "    pynvml.nvmlDeviceGetMemoryInfo(h)\n    pynvml.nvmlDeviceGetUtilizationRates(h)\n"
    "    pynvml.nvmlDeviceGetComputeRunningProcesses(h)\npynvml.nvmlShutdown()\n"
)


def median_us(fn: Callable[[], Any], rounds: int) -> float | str:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        try:
            fn()
        except Exception as e:  # (NotSupported on this GPU: say so)
            return f"n/a ({type(e).__name__})"
        times.append(time.perf_counter() - t)
    return round(statistics.median(times) * 1e6, 1)


def calls(rounds: int) -> None:
    import pynvml

    t = time.perf_counter()
    pynvml.nvmlInit()
    print(f"nvmlInit: {(time.perf_counter() - t) * 1e3:.1f} ms")
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    table: dict[str, Callable[[], Any]] = {
        "GetHandleByIndex": lambda: pynvml.nvmlDeviceGetHandleByIndex(0),
        "GetUUID": lambda: pynvml.nvmlDeviceGetUUID(h),
        "GetName": lambda: pynvml.nvmlDeviceGetName(h),
        "GetMemoryInfo v1": lambda: pynvml.nvmlDeviceGetMemoryInfo(h),
        "GetMemoryInfo v2": lambda: pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2),
        "GetUtilizationRates": lambda: pynvml.nvmlDeviceGetUtilizationRates(h),
        "GetFieldValues (power, limit)": lambda: pynvml.nvmlDeviceGetFieldValues(h, [185, 190]),
        "GetPowerUsage": lambda: pynvml.nvmlDeviceGetPowerUsage(h),
        "GetTemperature": lambda: pynvml.nvmlDeviceGetTemperature(h, 0),
        "GetPciInfo": lambda: pynvml.nvmlDeviceGetPciInfo(h),
        "GetPerformanceState": lambda: pynvml.nvmlDeviceGetPerformanceState(h),
        "GetFanSpeed": lambda: pynvml.nvmlDeviceGetFanSpeed(h),
        "GetCurrentClocksEventReasons": lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(h),
        "GetComputeRunningProcesses": lambda: pynvml.nvmlDeviceGetComputeRunningProcesses(h),
        "GetGraphicsRunningProcesses": lambda: pynvml.nvmlDeviceGetGraphicsRunningProcesses(h),
    }
    print(f"per call, median of {rounds} (us), GPU 0:")
    for name, fn in table.items():
        print(f"  {name:32s} {median_us(fn, rounds)}")
    from berth.devices import nvml

    nvml.session()
    whole = median_us(lambda: nvml.read_all(), rounds)
    floor = median_us(
        lambda: [
            (pynvml.nvmlDeviceGetName(g), pynvml.nvmlDeviceGetMemoryInfo(g),
             pynvml.nvmlDeviceGetUtilizationRates(g), pynvml.nvmlDeviceGetComputeRunningProcesses(g))
            for g in [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        ],
        rounds,
    )  # fmt: skip
    print(f"berth read_all() warm: {whole} us; the floor's four calls a GPU: {floor} us")


def processes(rounds: int) -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmds = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "minimal pynvml script": [sys.executable, "-c", MIN_NVML],
        "berth status": [sys.executable, "-m", "berth.cli.main", "status"],
        "berth status --json": [sys.executable, "-m", "berth.cli.main", "status", "--json"],
    }
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(rounds // 2 or 1):
        for name, argv in cmds.items():
            t = time.perf_counter()
            subprocess.run(argv, env=env, capture_output=True, check=True)
            times[name].append((time.perf_counter() - t) * 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        print(f"  {k:24s} p50 {v:7.1f} ms")
    floor = med["minimal pynvml script"]
    print(f"  berth status / floor: {med['berth status'] / floor:.2f}x; "
          f"--json / floor: {med['berth status --json'] / floor:.2f}x")  # fmt: skip
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "berth.cli.main", "status"],
                       env=env, capture_output=True, text=True, check=True)  # fmt: skip
    total = 0
    for line in r.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[2].startswith(" ") and not parts[2].startswith("  "):
            try:
                total += int(parts[1])  # cumulative of each top-level import
            except ValueError:
                continue
    print(f"  berth status's imports (-X importtime, top level, cumulative): {total / 1e3:.1f} ms")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args()
    calls(args.rounds)
    print("as processes, interleaved:")
    processes(args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
