"""berth on a real NVIDIA GPU (issue 26): what the fake library cannot teach, measured in one run.

    python3 bench/real_gpu.py --out DIR [--fake] [--budget SECONDS] [--steps a,b,...]
    bash bench/real_gpu.sh            # install + this + pytest tests/gpu, output in $OUT

Every step runs in a child process of its own with its own time limit (the whole group is
killed when it runs over, and what it had recorded is kept), so one hang loses one step.
After each step ``DIR/results.json`` (everything) and ``DIR/summary.md`` (the checks and the
numbers) are rewritten, so a run cut short still leaves what it measured.

Steps (in this order; ``--steps`` picks some):

``versions``  driver, NVML, CUDA driver, nvidia-ml-py, torch; per GPU MIG mode, ECC mode and
              errors, persistence and compute mode, memory info v2 (reserved); who runs this.
``status``    a PyTorch process holds 10 GiB; ``berth status --json`` against ``nvidia-smi
              --query-gpu`` / ``--query-compute-apps`` (nvidia-smi is only the reference here);
              then ``berth status --json`` (and nvidia-smi) as an unprivileged user this
              script creates: what it sees of root's process.
``select``    the same holder: ``berth select`` refuses the busy GPU, ``--explain`` says why,
              ``--max-procs 1`` takes it, ``--min-free`` above what is free refuses it; then
              a PyTorch job under ``berth run -g 0.5 --mem 20G``: the claim's own process does
              not count as outside, a whole GPU and 0.75 more are refused, 0.5 more fits.
``acquire``   ``berth.acquire`` in a PyTorch program: CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER,
              ``torch.cuda.device_count()``, torch's device UUID = the lease's, the claim in
              ``berth status --json``; and acquire after torch has initialised CUDA.
``daemon_pack`` a private daemon; eight ``-g 0.125 --mem 9G`` jobs each allocating 8 GiB, at
              once: all running together, each one's memory seen in NVML.
``ended``     how long the driver keeps listing a process after it exited (normal exit and
              kill -9), and its memory.
``caching``   what NVML reports while PyTorch's caching allocator holds freed memory, and
              after ``empty_cache()``.
``latency``   ``berth status`` / ``--json`` / ``select`` vs ``nvidia-smi`` vs a minimal pynvml
              script vs ``python -c pass``, interleaved, medians and ratios.
``isolate``   a private daemon with ``[daemon] isolate_devices = "required"``: a job given GPU 0
              opens /dev/nvidia0 and runs CUDA, not another GPU's node (195:1, made here); a
              CPU-only job (``-g 0``) gets EPERM on nvidia0 and no CUDA device, even with
              CUDA_VISIBLE_DEVICES removed.
``daemon_gap``  twenty 2-second one-GPU jobs in a row: dispatch gap (daemon: attempt end to
              next start; process: last line of one to first line of the next; GPU: to the
              next one's CUDA context), CUDA context creation time.

``--fake`` rehearses the whole run against tests/fakenvml (an H100-like fake GPU, built with
the system C compiler): torch and nvidia-smi are not used (their parts say "not available"),
the fake workload stands in for the PyTorch program. ``BERTH_FAKE_TORCH=1`` puts
tests/gpu/faketorch (a stand-in torch over the fake library, with a caching allocator) on the
path instead, and ``BERTH_FAKE_SMI=1`` adds a stand-in nvidia-smi answering from the fake
state: then the torch and nvidia-smi code paths are rehearsed too.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import itertools
import json
import os
import shutil
import signal
import stat
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import uuid as uuidlib
from collections.abc import Callable, Iterator
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_DIR = os.path.join(ROOT, "tests", "fakenvml")
FAKE_TORCH = os.path.join(ROOT, "tests", "gpu", "faketorch")
GiB = 1 << 30
MiB = 1 << 20
MARK = "BERTH_REAL_GPU_RUN"  # in the environment of everything this run starts (cleanup)
UNPRIVILEGED = "berthgpu"
DEADLINE_ENV = "BERTH_REAL_GPU_DEADLINE"  # time.time() at which the step is killed
TORCH_ENV = "BERTH_REAL_GPU_TORCH"  # why torch cannot be used, "" if it can (checked once)

SMI_GPU_FIELDS = (
    "name,uuid,pci.bus_id,memory.total,memory.used,memory.free,"
    "utilization.gpu,power.draw,temperature.gpu"
)
SMI_APP_FIELDS = "pid,used_memory,gpu_uuid"

# A GPU program: torch (real) or the fake workload's registration (--fake). One JSON argument:
# mem_gib, wait ("stdin" | "seconds" | "hold_file"), seconds, hold_file, record, acquire
# (berth.acquire's keyword arguments), torch_first. Prints one JSON line per event.
PROG = r"""
import json, os, sys, time
T0 = time.time()
args = json.loads(sys.argv[1])
mem = int(float(args.get("mem_gib", 0)) * (1 << 30))
record = args.get("record")


def emit(event, **kw):
    line = json.dumps({"event": event, "pid": os.getpid(), "time": time.time(), **kw})
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    if record:
        with open(record, "a") as f:
            f.write(line + "\n")


def acquire():
    import berth
    t = time.time()
    lease = berth.acquire(**args["acquire"])
    return lease, {"ids": lease.ids, "uuids": lease.uuids, "devices": lease.devices,
                   "seconds": round(time.time() - t, 3)}


emit("start", t0=T0, job=os.environ.get("BERTH_JOB_ID"))
lease = lease_info = None
if args.get("acquire") and not args.get("torch_first"):
    lease, lease_info = acquire()
env = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
fake = os.environ.get("BERTH_FAKE_WORKLOAD")
registration = None
if fake:
    import importlib.util
    spec = importlib.util.spec_from_file_location("workload", fake)
    wl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wl)
    state_path = os.environ["FAKE_NVML_STATE"]
    with open(state_path) as f:
        uuids = wl.visible_gpus(json.load(f)["gpus"], dict(os.environ))
    if not uuids:
        emit("error", error="no CUDA-capable device is detected", **env)
        sys.exit(100)
    t_import = time.time()
    if args.get("torch_first"):
        lease, lease_info = acquire()
    registration = wl.register(wl._procs_dir(state_path), uuids[:1], mem, 50, 0, "compute")
    info = {"backend": "fake", "device_count": len(uuids), "device_uuid": uuids[0]}
else:
    import torch
    t_import = time.time()
    if args.get("torch_first"):
        torch.zeros(1, device="cuda")
        lease, lease_info = acquire()
    count = torch.cuda.device_count()
    if mem:
        x = torch.empty(mem, dtype=torch.uint8, device="cuda")
    else:
        x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    raw = str(getattr(props, "uuid", "") or "")
    info = {"backend": "torch", "device_count": count, "current_device": torch.cuda.current_device(),
            "device_uuid": raw if raw.startswith("GPU-") or not raw else "GPU-" + raw,
            "device_name": props.name, "allocated": torch.cuda.memory_allocated(),
            "reserved": torch.cuda.memory_reserved(), "torch": torch.__version__}
emit("ready", import_s=round(t_import - T0, 3), cuda_s=round(time.time() - t_import, 3),
     lease=lease_info, env=env, **info)
wait = args.get("wait", "seconds")
if wait == "stdin":
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "exit":
            break
        if cmd == "free" and not fake:
            del x
            torch.cuda.synchronize()
            emit("freed", allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved())
        elif cmd == "empty" and not fake:
            torch.cuda.empty_cache()
            torch.cuda.synchronize()
            emit("emptied", allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved())
        else:
            emit("ack", cmd=cmd)
elif wait == "hold_file":
    deadline = time.time() + float(args.get("seconds", 120))
    while not os.path.exists(args["hold_file"]) and time.time() < deadline:
        time.sleep(0.02)
else:
    time.sleep(float(args.get("seconds", 0)))
if registration:
    os.unlink(registration)
emit("end")
"""

MIN_NVML = r"""
import pynvml
pynvml.nvmlInit()
for i in range(pynvml.nvmlDeviceGetCount()):
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    pynvml.nvmlDeviceGetName(h); pynvml.nvmlDeviceGetMemoryInfo(h)
    pynvml.nvmlDeviceGetUtilizationRates(h); pynvml.nvmlDeviceGetComputeRunningProcesses(h)
pynvml.nvmlShutdown()
"""


# A stand-in for nvidia-smi in --fake rehearsals (BERTH_FAKE_SMI=1): the two queries this
# script makes, answered from the fake library's state in nvidia-smi's CSV format.
FAKE_SMI = r"""
import json, os, sys
state = os.environ["FAKE_NVML_STATE"]
procs = os.environ.get("FAKE_NVML_PROCS") or state + ".procs"
gpus = json.load(open(state))["gpus"]
live = []
for name in os.listdir(procs) if os.path.isdir(procs) else ():
    if name.isdigit() and os.path.exists(f"/proc/{name}"):
        for line in open(os.path.join(procs, name)):
            uuid, mem = line.split()[:2]
            live.append((int(name), uuid, int(mem)))
arg = " ".join(sys.argv[1:])
if "--query-gpu" in arg:
    for g in gpus:
        used = g["memory_used"] + sum(m for _, u, m in live if u == g["uuid"])
        mib = lambda b: b // (1 << 20)
        print(f"{g['name']}, {g['uuid']}, {g['pci_bus_id']}, {mib(g['memory_total'])}, "
              f"{mib(used)}, {mib(g['memory_total'] - used)}, {g['util']}, "
              f"{g['power_mw'] / 1000:.2f}, {g['temp']}")
elif "--query-compute-apps" in arg:
    for pid, uuid, mem in live:
        print(f"{pid}, {mem >> 20}, {uuid}")
else:
    print("fake nvidia-smi (bench/real_gpu.py --fake)")
"""


# -- helpers -------------------------------------------------------------------------------


def summary_of(values: list[float], unit_ms: bool = True) -> dict[str, Any]:
    scale = 1000.0 if unit_ms else 1.0
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": round(statistics.median(values) * scale, 2),
        "max": round(max(values) * scale, 2),
        "min": round(min(values) * scale, 2),
    }


def smi_value(text: str) -> str | float | None:
    t = text.strip()
    if not t or t.startswith("[") or t.upper() in ("N/A", "NOT SUPPORTED"):
        return None
    try:
        return float(t)
    except ValueError:
        return t


def parse_smi_csv(text: str, fields: str) -> list[dict[str, Any]]:
    names = fields.split(",")
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(", ")]
        if len(cells) != len(names):
            cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(names):  # "No running processes found" and the like
            continue
        rows.append({n: smi_value(c) for n, c in zip(names, cells, strict=True)})
    return rows


def load_module(name: str, path: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the rig: where berth runs and what stands in for a GPU program --------------------------


class Rig:
    """Paths and environment of one run; ``fake`` uses tests/fakenvml instead of the driver."""

    def __init__(self, work: str, fake: bool, mark: str) -> None:
        self.work = work
        self.fake = fake
        self.mark = mark
        self.python = sys.executable
        self.prog = os.path.join(work, "prog.py")
        self.claims_dir = os.path.join(work, "claims")
        self.state_dir = os.path.join(work, "state")
        self.socket = os.path.join(work, "d.sock")
        env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_NVML")}
        for name in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "BERTH_SOCKET"):
            env.pop(name, None)
        ld = [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
        ld = [p for p in ld if os.path.join("fakenvml", "build") not in p]
        pythonpath = [ROOT, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
        if fake and os.environ.get("BERTH_FAKE_TORCH") == "1":
            pythonpath.insert(1, FAKE_TORCH)  # tests/gpu/faketorch stands in for torch
        env.update({
            "PYTHONPATH": os.pathsep.join(pythonpath),
            "PYTHONUNBUFFERED": "1",
            "BERTH_CONFIG": "",
            "BERTH_CLAIMS_DIR": self.claims_dir,
            "BERTH_STATE_DIR": self.state_dir,
            MARK: mark,
        })  # fmt: skip
        if fake:
            env.update(self._fake_env())
            ld.insert(0, env["BERTH_FAKE_LIB_DIR"])
        if ld:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(ld)
        else:
            env.pop("LD_LIBRARY_PATH", None)
        self.env = env

    def _fake_env(self) -> dict[str, str]:
        state = os.path.join(self.work, "nvml.json")
        lib_dir = os.environ.get("BERTH_FAKE_LIB_DIR")
        if not lib_dir:
            lib_dir = load_module("fakenvml_build", os.path.join(FAKE_DIR, "build.py")).build()
        if not os.path.exists(state):
            gpu = {
                "uuid": "GPU-0b2c5d7e-1f3a-4c6b-9d8e-7a6b5c4d3e2f",
                "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:18:00.0",
                "memory_total": 81559 * MiB, "memory_used": 0, "util": 0, "mem_util": 0,
                "power_mw": 70000, "power_limit_mw": 700000, "temp": 31, "pstate": 0,
                "processes": [], "errors": {},
            }  # fmt: skip
            with open(state, "w") as f:
                json.dump({"driver": "580.159.04", "cuda": 13000, "errors": {}, "gpus": [gpu]}, f)
        env = {
            "FAKE_NVML_STATE": state,
            "FAKE_NVML_PROCS": state + ".procs",
            "BERTH_FAKE_LIB_DIR": lib_dir,
        }
        if os.environ.get("BERTH_FAKE_TORCH") == "1":  # on PYTHONPATH: the program's torch branch
            env["BERTH_FAKE_TORCH"] = "1"
        else:  # the program registers as the fake workload does
            env["BERTH_FAKE_WORKLOAD"] = os.path.join(FAKE_DIR, "workload.py")
        return env

    # -- commands --

    def berth_argv(self, *args: str) -> list[str]:
        return [self.python, "-m", "berth.cli.main", *args]

    def berth(
        self, *args: str, timeout: float = 60, env: dict[str, str] | None = None, **kw: Any
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.berth_argv(*args), env={**self.env, **(env or {})}, capture_output=True,
            text=True, timeout=timeout, check=False, cwd=self.work, **kw,
        )  # fmt: skip

    def status_json(self, timeout: float = 60) -> dict[str, Any]:
        r = self.berth("status", "--json", timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"berth status --json exit {r.returncode}: {r.stderr.strip()}")
        out: dict[str, Any] = json.loads(r.stdout)
        return out

    def smi(self) -> str | None:
        """nvidia-smi's path, or None. With --fake: None (a real one would read a real GPU),
        or with BERTH_FAKE_SMI=1 a stand-in that answers from the fake state in nvidia-smi's
        format, so the comparison code is rehearsed too."""
        if not self.fake:
            return shutil.which("nvidia-smi")
        if os.environ.get("BERTH_FAKE_SMI") != "1":
            return None
        path = os.path.join(self.work, "fake-nvidia-smi")
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(f"#!{self.python}\n{FAKE_SMI}")
            os.chmod(path, 0o755)
        return path

    def torch(self) -> str | None:
        """Why torch cannot be used (None: it can). Checked in a child: no CUDA context here."""
        if self.fake and self.env.get("BERTH_FAKE_TORCH") != "1":
            return "not available: --fake (the fake workload stands in)"
        if TORCH_ENV in os.environ:  # checked once by the orchestrator
            return os.environ[TORCH_ENV] or None
        r = subprocess.run(
            [self.python, "-c", "import torch; print(torch.__version__, torch.cuda.is_available())"],
            env=self.env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if r.returncode != 0:
            return f"not available: torch does not import ({r.stderr.strip().splitlines()[-1:]})"
        if not r.stdout.strip().endswith("True"):
            return f"not available: torch.cuda.is_available() is False ({r.stdout.strip()})"
        return None

    def prog_argv(self, **args: Any) -> list[str]:
        return [self.python, self.prog, json.dumps(args)]

    def start_prog(self, *, wrap: list[str] | None = None, env: dict[str, str] | None = None,
                   **args: Any) -> Prog:  # fmt: skip
        """Start the GPU program (``wrap``: argv before it, e.g. ``berth run ... --``)."""
        argv = [*(wrap or []), *self.prog_argv(**args)]
        return Prog(argv, {**self.env, **(env or {})}, self.work)

    def pids_on_gpu(self) -> dict[int, int | None] | None:
        """NVML's compute processes on GPU 0 right now, pid -> used memory (a minimal read)."""
        import pynvml

        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(0)
            return {p.pid: p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)}
        except pynvml.NVMLError:
            return None

    def memory_used(self) -> int | None:
        import pynvml

        try:
            used: int = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used
            return used
        except pynvml.NVMLError:
            return None


class Prog:
    """A running GPU program: its JSON lines, commands on stdin, cleanup by process group."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        self.argv = argv
        self.proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        self.events: list[dict[str, Any]] = []

    def next_event(self, want: str, timeout: float = 60) -> dict[str, Any]:
        """Read lines until the event ``want`` (raising on EOF, an error event or timeout)."""
        import selectors

        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {want!r} from {self.argv[-1][:80]} in {timeout}s")
                if not sel.select(left):
                    continue
                line = self.proc.stdout.readline()
                if not line:
                    self.proc.wait(timeout=10)
                    err = self.proc.stderr.read() if self.proc.stderr else ""
                    raise RuntimeError(
                        f"program ended (exit {self.proc.returncode}) before {want!r}: "
                        f"{err.strip()[-2000:]}"
                    )
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # berth run's own lines, if any
                self.events.append(event)
                if event.get("event") == "error":
                    raise RuntimeError(f"program error: {event}")
                if event.get("event") == want:
                    return event
        finally:
            sel.close()

    def send(self, cmd: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = 30) -> int:
        with contextlib.suppress(BrokenPipeError, OSError):
            self.send("exit")
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream:
                with contextlib.suppress(OSError):
                    stream.close()


# -- a step's report -------------------------------------------------------------------------


class Report:
    """What one step found: checks (name, ok: True/False/None = not available, detail) and data;
    saved to its file after every change, so a step killed for time keeps what it had."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.checks: list[dict[str, Any]] = []
        self.data: dict[str, Any] = {}
        self.status = "running"

    def check(self, name: str, ok: bool | None, detail: Any = None) -> bool:
        self.checks.append({"name": name, "ok": ok, "detail": detail})
        self.save()
        return bool(ok)

    def na(self, name: str, why: str) -> None:
        self.check(name, None, why)

    def put(self, key: str, value: Any) -> None:
        self.data[key] = value
        self.save()

    def save(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"status": self.status, "checks": self.checks, "data": self.data}, f,
                      indent=1, default=str)  # fmt: skip
        os.replace(tmp, self.path)


@contextlib.contextmanager
def progs() -> Iterator[list[Prog]]:
    """Programs started in the block are killed (by process group) when it ends."""
    started: list[Prog] = []
    try:
        yield started
    finally:
        for p in started:
            p.close()


def read_events(record: str, event: str) -> list[dict[str, Any]]:
    """The ``event`` lines GPU programs appended to ``record`` so far."""
    try:
        with open(record) as f:
            lines = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []
    return [e for e in lines if e.get("event") == event]


def proc_entry(status: dict[str, Any], pid: int) -> dict[str, Any] | None:
    for g in status.get("gpus", []):
        for p in g.get("processes") or ():
            if p.get("pid") == pid:
                entry: dict[str, Any] = p
                return entry
    return None


# -- steps ---------------------------------------------------------------------------------


def step_versions(rig: Rig, rep: Report) -> None:
    import pynvml

    from berth.devices import nvml as bnvml

    rep.put("uid", os.getuid())
    rep.put("python", sys.version.split()[0])
    rep.put("kernel", os.uname().release)
    rep.put("mode", "fake" if rig.fake else "real")
    with contextlib.suppress(Exception):
        from importlib.metadata import version

        rep.put("nvidia_ml_py", version("nvidia-ml-py"))
    with contextlib.suppress(Exception):
        with open("/proc/driver/nvidia/version") as f:
            rep.put("proc_driver_version", f.readline().strip())
    bnvml.session()  # berth's own start-up path (its error messages if it fails)

    def q(key: str, fn: Callable[[], Any]) -> Any:
        try:
            value = fn()
        except Exception as e:  # NVMLError_NotSupported, FunctionNotFound (fake), ...
            value = f"n/a: {type(e).__name__}: {e}"
        if isinstance(value, bytes):
            value = value.decode()
        return value

    system = {
        "driver": q("driver", pynvml.nvmlSystemGetDriverVersion),
        "nvml": q("nvml", pynvml.nvmlSystemGetNVMLVersion),
        "cuda_driver": q("cuda", pynvml.nvmlSystemGetCudaDriverVersion),
        "count": q("count", pynvml.nvmlDeviceGetCount),
    }
    rep.put("system", system)
    gpus = []
    for i in range(system["count"] if isinstance(system["count"], int) else 0):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        mem2 = q(
            "mem2", lambda h=h: pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
        )
        gpus.append({
            "index": i,
            "name": q("name", lambda h=h: pynvml.nvmlDeviceGetName(h)),
            "uuid": q("uuid", lambda h=h: pynvml.nvmlDeviceGetUUID(h)),
            "mig_mode": q("mig", lambda h=h: pynvml.nvmlDeviceGetMigMode(h)),
            "ecc_mode": q("ecc", lambda h=h: pynvml.nvmlDeviceGetEccMode(h)),
            "ecc_uncorrected_volatile": q("eccerr", lambda h=h: pynvml.nvmlDeviceGetTotalEccErrors(
                h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC)),
            "persistence_mode": q("pm", lambda h=h: pynvml.nvmlDeviceGetPersistenceMode(h)),
            "compute_mode": q("cm", lambda h=h: pynvml.nvmlDeviceGetComputeMode(h)),
            "virtualization_mode": q("virt", lambda h=h: pynvml.nvmlDeviceGetVirtualizationMode(h)),
            "memory_v1": q("mem1", lambda h=h: vars_of(pynvml.nvmlDeviceGetMemoryInfo(h))),
            "memory_v2": vars_of(mem2) if not isinstance(mem2, str) else mem2,
            # what the fake library must imitate (issue 37): the raw answers berth reads
            "minor_number": q("minor", lambda h=h: pynvml.nvmlDeviceGetMinorNumber(h)),
            "pci_bus_id": q("pci", lambda h=h: pynvml.nvmlDeviceGetPciInfo(h).busId),
            "compute_capability": q("cc", lambda h=h: pynvml.nvmlDeviceGetCudaComputeCapability(h)),
            "clocks_event_reasons": q("cer", lambda h=h: hex(
                pynvml.nvmlDeviceGetCurrentClocksEventReasons(h))),
            "power_usage_mw": q("pw", lambda h=h: pynvml.nvmlDeviceGetPowerUsage(h)),
            "power_limit_mw": q("pl", lambda h=h: pynvml.nvmlDeviceGetEnforcedPowerLimit(h)),
            "temperature": q("t", lambda h=h: pynvml.nvmlDeviceGetTemperature(h, 0)),
            "pstate": q("ps", lambda h=h: pynvml.nvmlDeviceGetPerformanceState(h)),
            "fan": q("fan", lambda h=h: pynvml.nvmlDeviceGetFanSpeed(h)),
            "utilization": q("util", lambda h=h: vars_of(pynvml.nvmlDeviceGetUtilizationRates(h))),
            "compute_processes": q("cp", lambda h=h: [vars_of(x) for x in
                                   pynvml.nvmlDeviceGetComputeRunningProcesses(h)]),
            "graphics_processes": q("gp", lambda h=h: [vars_of(x) for x in
                                    pynvml.nvmlDeviceGetGraphicsRunningProcesses(h)]),
            "bar1": q("bar1", lambda h=h: vars_of(pynvml.nvmlDeviceGetBAR1MemoryInfo(h))),
        })  # fmt: skip
    rep.put("gpus", gpus)
    rep.check("NVML answers and counts at least one GPU", isinstance(system["count"], int)
              and system["count"] > 0, system)  # fmt: skip
    for g in gpus:
        mig = g["mig_mode"]
        if isinstance(mig, (list, tuple)):
            rep.check(f"GPU {g['index']}: MIG mode off (berth manages whole GPUs)",
                      mig[0] == 0, {"current": mig[0], "pending": mig[1]})  # fmt: skip
        else:
            rep.na(f"GPU {g['index']}: MIG mode", str(mig))
    why = rig.torch()
    if why:
        rep.put("torch", why)
    else:
        r = subprocess.run(
            [rig.python, "-c", "import torch; print(torch.__version__, torch.version.cuda)"],
            env=rig.env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        rep.put("torch", r.stdout.strip())
    rep.put("dev_nvidia", sorted(n for n in os.listdir("/dev") if n.startswith("nvidia")))
    with contextlib.suppress(OSError):
        with open("/proc/self/cgroup") as f:
            rep.put("own_cgroup", f.read().strip())
    with contextlib.suppress(OSError):
        with open("/proc/self/mounts") as f:
            rep.put("cgroup_mounts", [m for m in f.read().splitlines() if "cgroup" in m])
    r = rig.berth("admin", "doctor", "--json", timeout=60)
    rep.put("doctor", r.stdout.strip()[-3000:] or r.stderr.strip()[-1000:])
    smi = rig.smi()
    if smi:
        r = subprocess.run([smi, "--version"], capture_output=True, text=True, timeout=30)
        rep.put("nvidia_smi_version", r.stdout.strip())
    else:
        rep.put("nvidia_smi_version", "not available" + (" (--fake)" if rig.fake else ""))


def vars_of(obj: Any) -> dict[str, Any]:
    fields = getattr(obj, "_fields_", None)
    if fields:
        return {name: getattr(obj, name) for name, *_ in fields}
    return {"value": str(obj)}


def holder(
    rig: Rig, started: list[Prog], mem_gib: float = 10, **kw: Any
) -> tuple[Prog, dict[str, Any]]:
    p = rig.start_prog(mem_gib=mem_gib, wait="stdin", **kw)
    started.append(p)
    ready = p.next_event("ready", timeout=120)
    return p, ready


def compare_smi(rep: Report, status: dict[str, Any], gpu_rows: list[dict[str, Any]],
                apps: list[dict[str, Any]], pid: int, label: str) -> None:  # fmt: skip
    by_uuid = {g["uuid"]: g for g in status["gpus"]}
    rep.check(f"{label}: same GPUs (UUIDs) as nvidia-smi",
              set(by_uuid) == {r["uuid"] for r in gpu_rows},
              {"berth": sorted(by_uuid), "nvidia-smi": sorted(r["uuid"] for r in gpu_rows)})  # fmt: skip
    for row in gpu_rows:
        g = by_uuid.get(row["uuid"])
        if g is None:
            continue
        n = g["index"]
        rep.check(f"{label}: GPU {n} name", g["name"] == row["name"], [g["name"], row["name"]])
        rep.check(f"{label}: GPU {n} PCI bus id",
                  str(g["pci_bus_id"]).lower() == str(row["pci.bus_id"]).lower(),
                  [g["pci_bus_id"], row["pci.bus_id"]])  # fmt: skip
        diff = {}
        for key, smi_key in (("memory_total", "memory.total"), ("memory_used", "memory.used"),
                             ("memory_free", "memory.free")):  # fmt: skip
            mine = g.get(key)
            theirs = row.get(smi_key)
            diff[key] = {"berth_mib": None if mine is None else round(mine / MiB, 1),
                         "smi_mib": theirs,
                         "berth_minus_smi_mib": None if mine is None or theirs is None
                         else round(mine / MiB - float(theirs), 1)}  # fmt: skip
        rep.put(f"{label}_memory_gpu{n}", diff)
        total = diff["memory_total"]["berth_minus_smi_mib"]
        rep.check(f"{label}: GPU {n} memory.total within 1 MiB", total is not None and abs(total) <= 1,
                  diff["memory_total"])  # fmt: skip
        free = diff["memory_free"]["berth_minus_smi_mib"]
        rep.check(f"{label}: GPU {n} memory.free within 64 MiB (read moments apart)",
                  free is not None and abs(free) <= 64, diff["memory_free"])  # fmt: skip
        used = diff["memory_used"]["berth_minus_smi_mib"]
        rep.check(f"{label}: GPU {n} memory.used within 64 MiB (a larger gap: NVML v1 counts "
                  "reserved memory as used, nvidia-smi does not)",
                  used is not None and abs(used) <= 64, diff["memory_used"])  # fmt: skip
        rep.put(f"{label}_telemetry_gpu{n}", {
            "utilization": [g.get("utilization"), row.get("utilization.gpu")],
            "power_w": [g.get("power_draw"), row.get("power.draw")],
            "temperature": [g.get("temperature"), row.get("temperature.gpu")],
        })  # fmt: skip
    mine = proc_entry(status, pid)
    theirs = [a for a in apps if a.get("pid") is not None and int(a["pid"]) == pid]
    rep.put(f"{label}_holder", {"berth": mine, "nvidia-smi": theirs,
                                "smi_pids": [a.get("pid") for a in apps]})  # fmt: skip
    rep.check(f"{label}: nvidia-smi lists the holder pid {pid}", bool(theirs), apps)
    rep.check(f"{label}: berth lists the holder pid {pid}", mine is not None,
              [p for g in status["gpus"] for p in g.get("processes") or ()])  # fmt: skip
    if mine and theirs and mine.get("used_memory") is not None and theirs[0].get("used_memory"):
        d = mine["used_memory"] / MiB - float(theirs[0]["used_memory"])
        rep.check(
            f"{label}: holder's used_memory equal to nvidia-smi's (MiB)",
            abs(d) <= 1,
            {"berth_mib": mine["used_memory"] / MiB, "smi_mib": theirs[0]["used_memory"]},
        )


def step_status(rig: Rig, rep: Report) -> None:
    why = rig.torch()
    rep.put("holder_backend", why or "torch")
    with progs() as started:
        p, ready = holder(rig, started, 10)
        pid = p.proc.pid
        rep.put("holder_ready", ready)
        status = rig.status_json()
        rep.put("berth_status_json", status)
        mine = proc_entry(status, pid)
        rep.check("berth status lists the 10 GiB holder", mine is not None, pid)
        if mine:
            used = mine.get("used_memory")
            rep.check("holder's used_memory >= 10 GiB (tensor + CUDA context)",
                      used is not None and used >= 10 * GiB,
                      {"used_mib": None if used is None else used / MiB,
                       "over_10GiB_mib": None if used is None else (used - 10 * GiB) / MiB})  # fmt: skip
            rep.check("holder's user is root (this run's user)",
                      mine.get("user") == _user_name(os.getuid()), mine.get("user"))  # fmt: skip
            rep.check("holder's command names the program", "prog.py" in (mine.get("command") or ""),
                      mine.get("command"))  # fmt: skip
        text = rig.berth("status")
        rep.put("berth_status_text", text.stdout + text.stderr)
        smi = rig.smi()
        if not smi:
            rep.na("berth status --json against nvidia-smi", "nvidia-smi not available")
        else:
            a = subprocess.run([smi, f"--query-gpu={SMI_GPU_FIELDS}", "--format=csv,noheader,nounits"],
                               capture_output=True, text=True, timeout=60, env=rig.env)  # fmt: skip
            b = subprocess.run([smi, f"--query-compute-apps={SMI_APP_FIELDS}",
                                "--format=csv,noheader,nounits"], capture_output=True, text=True,
                               timeout=60, env=rig.env)  # fmt: skip
            rep.put("smi_raw", {"gpus": a.stdout + a.stderr, "apps": b.stdout + b.stderr})
            compare_smi(rep, status, parse_smi_csv(a.stdout, SMI_GPU_FIELDS),
                        parse_smi_csv(b.stdout, SMI_APP_FIELDS), pid, "root")  # fmt: skip
        # the same as an unprivileged user
        try:
            user = unprivileged_user()
        except Exception as e:
            rep.na("as an unprivileged user", f"no unprivileged user: {e}")
            return
        rep.put("unprivileged_user", {"name": user[0], "uid": user[1], "gid": user[2]})
        r = run_as(rig, user, ["status", "--json"])
        rep.put("unprivileged_status_rc", r.returncode)
        rep.put("unprivileged_status_stderr", r.stderr[-4000:])
        if not rep.check(f"berth status --json as {user[0]} exits 0", r.returncode == 0,
                         r.stderr.strip()[-2000:]):  # fmt: skip
            return
        theirs = json.loads(r.stdout)
        rep.put("unprivileged_status_json", theirs)
        seen = proc_entry(theirs, pid)
        rep.put("unprivileged_sees_holder", seen)
        rep.check(f"as {user[0]}: every GPU healthy", all(g["healthy"] for g in theirs["gpus"]),
                  [(g["index"], g["error"]) for g in theirs["gpus"]])  # fmt: skip
        rep.check(f"as {user[0]}: root's holder listed (NVML shows other users' processes)",
                  seen is not None, seen)  # fmt: skip
        if seen:
            rep.check(f"as {user[0]}: root's holder user/command right or null, never wrong",
                      seen.get("user") in (None, "root") and (seen.get("command") is None
                                                                or "prog.py" in seen["command"]),
                      seen)  # fmt: skip
            rep.put("unprivileged_used_memory_is_null", seen.get("used_memory") is None)
        sel = run_as(rig, user, ["select", "--only", "0", "--explain"])
        rep.put("unprivileged_select", {"rc": sel.returncode, "stdout": sel.stdout,
                                        "stderr": sel.stderr[-2000:]})  # fmt: skip
        rep.check(f"as {user[0]}: berth select refuses the GPU root's PyTorch process uses",
                  sel.returncode == 1 and sel.stdout == "", sel.stderr[-1000:])  # fmt: skip
        if smi:
            try:
                s = run_as(rig, user, [smi, f"--query-compute-apps={SMI_APP_FIELDS}",
                                       "--format=csv,noheader,nounits"], berth=False)  # fmt: skip
                rep.put("unprivileged_smi_apps", s.stdout + s.stderr)
            except OSError as e:
                rep.put("unprivileged_smi_apps", f"could not run: {e}")


def _user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def unprivileged_user() -> tuple[str, int, int]:
    """(name, uid, gid) of an unprivileged user: ``berthgpu``, created if need be (root)."""
    import pwd

    try:
        pw = pwd.getpwnam(UNPRIVILEGED)
    except KeyError:
        if os.getuid() != 0:
            raise RuntimeError("not root: cannot create a user") from None
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        r = subprocess.run([useradd, "--system", "--no-create-home", "--shell", "/bin/false",
                            UNPRIVILEGED], capture_output=True, text=True, timeout=30)  # fmt: skip
        if r.returncode != 0:
            pw = pwd.getpwnam("nobody")  # no useradd: the usual unprivileged one
            return pw.pw_name, pw.pw_uid, pw.pw_gid
        pw = pwd.getpwnam(UNPRIVILEGED)
    return pw.pw_name, pw.pw_uid, pw.pw_gid


def user_tree(rig: Rig) -> str:
    """A copy of berth every user can read (the checkout may live under /root)."""
    dest = os.path.join(rig.work, "pub")
    if not os.path.isdir(dest):
        shutil.copytree(os.path.join(ROOT, "berth"), os.path.join(dest, "berth"),
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
        for d, _, files in os.walk(dest):
            os.chmod(d, 0o755)
            for name in files:
                os.chmod(os.path.join(d, name), 0o644)
    return dest


# The interpreter and its libraries may be where the user cannot read (under /root): started
# as root, it runs the command once with its output discarded (every module it needs is then
# loaded), shuts NVML down and forgets the config, becomes the user and runs it again. NVML is
# initialised afresh by the user, as it would be in a process of theirs.
AS_USER = r"""
import io, os, sys
from berth.cli.main import main
from berth import config
from berth.devices import nvml
uid, gid, args = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
out, err = sys.stdout, sys.stderr
sys.stdout = sys.stderr = io.StringIO()
main(args)
nvml.reset()
config.reset()
sys.stdout, sys.stderr = out, err
os.setgroups([]); os.setgid(gid); os.setuid(uid)
sys.exit(main(args))
"""


def run_as(rig: Rig, user: tuple[str, int, int], args: list[str], *, berth: bool = True,
           timeout: float = 60) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``berth ARGS`` (or the program ``ARGS`` if not ``berth``) as ``user``."""
    env = dict(rig.env)
    rest = [p for p in env["PYTHONPATH"].split(os.pathsep) if p != ROOT]
    env.update({"PYTHONPATH": os.pathsep.join([user_tree(rig), *rest]), "HOME": "/tmp",
                "USER": user[0], "LOGNAME": user[0]})  # fmt: skip
    if berth:
        argv = [rig.python, "-c", AS_USER, str(user[1]), str(user[2]), *args]
        ids: dict[str, Any] = {}
    else:
        argv = args
        ids = {"user": user[1], "group": user[2], "extra_groups": []}
    return subprocess.run(argv, env=env, cwd="/tmp", capture_output=True, text=True,
                          timeout=timeout, check=False, **ids)  # fmt: skip


def step_select(rig: Rig, rep: Report) -> None:
    with progs() as started:
        p, _ = holder(rig, started, 10)
        r = rig.berth("select", "--explain")
        rep.put("select_default", {"rc": r.returncode, "stdout": r.stdout, "stderr": r.stderr})
        rep.check(
            "select refuses the GPU a PyTorch process uses (exit 1)", r.returncode == 1, r.stderr
        )
        rep.check("--explain names the outside process", "1 process > 0" in r.stderr, r.stderr)
        r = rig.berth("select", "--explain", "--max-procs", "1")
        rep.put("select_max_procs_1", {"rc": r.returncode, "stdout": r.stdout, "stderr": r.stderr})
        rep.check("select --max-procs 1 takes it (prints 0)", r.returncode == 0 and r.stdout.strip() == "0",
                  [r.stdout, r.stderr])  # fmt: skip
        free = rig.status_json()["gpus"][0]["memory_free"]
        ask = f"{free // GiB + 2}G"
        r = rig.berth("select", "--explain", "--max-procs", "1", "--min-free", ask)
        rep.put(
            "select_min_free", {"ask": ask, "free": free, "rc": r.returncode, "stderr": r.stderr}
        )
        rep.check(f"select --min-free {ask} (more than the {free / GiB:.1f} GiB free) refuses it",
                  r.returncode == 1 and "free" in r.stderr, r.stderr)  # fmt: skip
        p.finish()
        # a PyTorch job under a berth claim of half the GPU
        run = rig.start_prog(wrap=rig.berth_argv("run", "-g", "0.5", "--mem", "20G", "--"),
                             mem_gib=8, wait="stdin")  # fmt: skip
        started.append(run)
        job = run.next_event("ready", timeout=120)
        rep.put("claimed_job", job)
        status = rig.status_json()
        claims = status.get("claims", {}).get("claims", [])
        rep.put("claims", claims)
        rep.check("status shows the berth run claim (share 0.5, 20G)",
                  any(c.get("share") == 0.5 for c in claims), claims)  # fmt: skip
        holders = {q for c in claims for q in c.get("pids") or ()}
        rep.check("the claim's holder pids include the job's process (NVML pid)",
                  job["pid"] in holders or any(_ancestor(h, job["pid"]) for h in holders),
                  {"job": job["pid"], "holders": sorted(holders)})  # fmt: skip
        checks = [
            (
                "whole GPU refused: held by a berth claim",
                ["select", "--explain", "--max-procs", "0"],
                1,
                "held by berth claims",
            ),
        ]
        for name, argv, rc, needle in checks:
            r = rig.berth(*argv)
            rep.put(name, {"rc": r.returncode, "stdout": r.stdout, "stderr": r.stderr})
            rep.check(name, r.returncode == rc and needle in r.stderr, r.stderr)
        code = (
            "import json, berth.api as a\n"
            "out = {}\n"
            "for share in (0.5, 0.75):\n"
            "    s = a.selection(1, share=share, mem='20G', max_procs=0)\n"
            "    out[str(share)] = {'chosen': [g.index for g in s.chosen], 'why': s.explain()}\n"
            "print(json.dumps(out))\n"
        )
        r = subprocess.run([rig.python, "-c", code], env=rig.env, capture_output=True, text=True,
                           timeout=60, check=False)  # fmt: skip
        rep.put(
            "share_selection", {"rc": r.returncode, "stdout": r.stdout, "stderr": r.stderr[-2000:]}
        )
        if r.returncode == 0:
            got = json.loads(r.stdout)
            rep.check("0.5 more fits beside the 0.5 claim (its own process not counted as outside)",
                      got["0.5"]["chosen"] == [0], got["0.5"])  # fmt: skip
            rep.check(
                "0.75 more is refused (0.5 + 0.75 > 1)", got["0.75"]["chosen"] == [], got["0.75"]
            )
        else:
            rep.check("berth.api.selection with a share runs", False, r.stderr[-2000:])
        rc = run.finish()
        rep.check("berth run's job ends 0", rc == 0, rc)


def _ancestor(pid: int, child: int) -> bool:
    """Is ``pid`` an ancestor of ``child``?"""
    cur = child
    for _ in range(64):
        try:
            with open(f"/proc/{cur}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if ppid == pid:
            return True
        if ppid <= 1:
            return False
        cur = ppid
    return False


def step_acquire(rig: Rig, rep: Report) -> None:
    with progs() as started:
        p = rig.start_prog(mem_gib=2, wait="stdin",
                           acquire={"gpus": 1, "label": "real-gpu-check", "timeout": 60})  # fmt: skip
        started.append(p)
        ready = p.next_event("ready", timeout=120)
        rep.put("ready", ready)
        env = ready.get("env") or {}
        lease = ready.get("lease") or {}
        rep.check("CUDA_VISIBLE_DEVICES = the lease's NVML ids",
                  env.get("CUDA_VISIBLE_DEVICES") == ",".join(str(i) for i in lease.get("ids", [])),
                  [env, lease])  # fmt: skip
        rep.check(
            "CUDA_DEVICE_ORDER = PCI_BUS_ID", env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID", env
        )
        rep.check(
            "torch.cuda.device_count() == 1",
            ready.get("device_count") == 1,
            ready.get("device_count"),
        )
        rep.check("the device torch uses is the claimed GPU (UUID)",
                  ready.get("device_uuid") in lease.get("uuids", []),
                  [ready.get("device_uuid"), lease.get("uuids")])  # fmt: skip
        status = rig.status_json()
        claims = status.get("claims", {}).get("claims", [])
        rep.put("claims", claims)
        mine = [c for c in claims if ready["pid"] in (c.get("pids") or ())]
        rep.check("berth status shows the claim, held by the program's pid", bool(mine), claims)
        rep.check(
            "the claim carries the label",
            any("real-gpu-check" in json.dumps(c) for c in mine),
            mine,
        )
        rep.check("NVML lists the program on the claimed GPU", proc_entry(status, ready["pid"]) is not None,
                  [g.get("processes") for g in status["gpus"]])  # fmt: skip
        rc = p.finish()
        rep.check("the program ends 0", rc == 0, rc)
        after = rig.status_json().get("claims", {}).get("claims", [])
        rep.check("its claim is gone once it has ended", not [c for c in after if ready["pid"] in
                                                                (c.get("pids") or ())], after)  # fmt: skip
        # acquire after torch has initialised CUDA: CUDA_VISIBLE_DEVICES can no longer apply.
        # The process's own CUDA context is then a process on the GPU in NVML's list; berth
        # leaves the caller out of outside use (it waited for itself before: issue 26).
        why = rig.torch()
        if why:
            rep.na("acquire after CUDA init", why)
            return
        for name, extra in (("default filters", {}), ("max_procs=1", {"max_procs": 1})):
            q = rig.start_prog(mem_gib=0, wait="stdin", torch_first=True,
                               acquire={"gpus": 1, "label": "late", "timeout": 5, **extra})  # fmt: skip
            started.append(q)
            try:
                late = q.next_event("ready", timeout=120)
            except RuntimeError as e:
                rep.check(f"acquire after CUDA init ({name}) gets the GPU", False, str(e)[-600:])
                continue
            rep.check(f"acquire after CUDA init ({name}) gets the GPU", True, late.get("lease"))
            q.finish()
            err = q.proc.stderr.read() if q.proc.stderr else ""
            rep.put(f"acquire_after_cuda_init ({name})", {"ready": late, "stderr": err[-2000:]})
            rep.check(f"acquire after CUDA init ({name}): lease.devices names the claimed GPU as "
                      "this process sees it, with a warning",
                      (late.get("lease") or {}).get("devices") == ["cuda:0"]
                      and "warn" in err.lower(), [late.get("lease"), err[-500:]])  # fmt: skip


class Daemon:
    """A private berth daemon on the rig's temp state dir and socket."""

    def __init__(self, rig: Rig, *flags: str) -> None:
        self.rig = rig
        os.makedirs(rig.state_dir, exist_ok=True)
        self.log = os.path.join(rig.work, "daemon.out")
        rig.env["BERTH_SOCKET"] = rig.socket
        out = open(self.log, "ab")  # the child keeps its own copy
        self.proc = subprocess.Popen(rig.berth_argv("daemon", "--foreground", *flags),
                                     env=rig.env, stdout=out, stderr=subprocess.STDOUT,
                                     cwd=rig.work)  # fmt: skip
        out.close()
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited {self.proc.returncode}: {self.tail()}")
            if self.rig.berth("queue", timeout=10).returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"daemon did not answer in 30 s: {self.tail()}")
            time.sleep(0.1)

    def tail(self) -> str:
        with open(self.log, errors="replace") as f:
            return f.read()[-3000:]

    def submit(self, *argv: str) -> int:
        r = self.rig.berth("submit", "--parsable", *argv)
        if r.returncode != 0:
            raise RuntimeError(f"submit failed: {r.stderr.strip()}")
        return int(r.stdout.strip().split(";")[0])

    def jobs(self) -> dict[int, dict[str, Any]]:
        r = self.rig.berth("queue", "--all", "--json")
        rows = json.loads(r.stdout)["jobs"]
        return {int(j["id"]): j for j in rows}

    def show(self, job: int) -> dict[str, Any]:
        r = self.rig.berth("show", str(job), "--json")
        out: dict[str, Any] = json.loads(r.stdout)
        return out.get("job", out)

    def wait(self, ids: list[int], states: set[str], timeout: float) -> dict[int, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            rows = self.jobs()
            if all(i in rows and rows[i]["state"] in states for i in ids):
                return rows
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobs not {states} in {timeout}s: "
                                   f"{[(i, rows.get(i, {}).get('state')) for i in ids]}")  # fmt: skip
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.rig.env.pop("BERTH_SOCKET", None)


DONE = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "LOST"}


def step_daemon_pack(rig: Rig, rep: Report) -> None:
    import pynvml

    d = Daemon(rig)
    try:
        release = os.path.join(rig.work, "pack.release")
        record = os.path.join(rig.work, "pack.jsonl")
        ids = [
            d.submit("-g", "0.125", "--mem", "9G", "-J", f"pack{k}", "-D", rig.work, "--",
                     *rig.prog_argv(mem_gib=8, wait="hold_file", hold_file=release,
                                    seconds=120, record=record))
            for k in range(8)
        ]  # fmt: skip
        rep.put("ids", ids)
        t0 = time.monotonic()
        rows = d.wait(ids, {"RUNNING", *DONE}, 60)
        rep.check("all eight -g 0.125 --mem 9G jobs run at once",
                  all(rows[i]["state"] == "RUNNING" for i in ids),
                  {i: rows[i]["state"] for i in ids})  # fmt: skip
        # every job's program ready (CUDA context + 8 GiB), then each one's memory in NVML
        deadline = time.monotonic() + 120
        ready: dict[int, dict[str, Any]] = {}
        while len(ready) < 8 and time.monotonic() < deadline:
            ready = {e["pid"]: e for e in read_events(record, "ready")}
            time.sleep(0.1)
        rep.put("ready_seconds", round(time.monotonic() - t0, 2))
        rep.put("ready", list(ready.values()))
        rep.check("all eight programs allocated 8 GiB", len(ready) == 8, len(ready))
        seen = rig.pids_on_gpu() or {}
        used = rig.memory_used()
        status = rig.status_json()
        rep.put("nvml_processes", {str(k): v for k, v in seen.items()})
        rep.put("memory_used_mib", None if used is None else used / MiB)
        rep.put("berth_status_processes", status["gpus"][0].get("processes"))
        per = {pid: seen.get(pid) for pid in ready}
        rep.check("NVML lists each job's process with >= 8 GiB",
                  all(v is not None and v >= 8 * GiB for v in per.values()) and len(per) == 8,
                  {str(k): None if v is None else round(v / MiB) for k, v in per.items()})  # fmt: skip
        if per and all(v is not None for v in per.values()):
            over = [(v - 8 * GiB) / MiB for v in per.values() if v is not None]
            rep.put("per_process_over_8GiB_mib", {"min": min(over), "max": max(over)})
        jobs_gpus = {i: (d.show(i).get("attempts") or [{}])[-1].get("gpus") for i in ids}
        rep.put("job_gpus", jobs_gpus)
        with contextlib.suppress(Exception):
            rep.put("nvml_utilization", pynvml.nvmlDeviceGetUtilizationRates(
                pynvml.nvmlDeviceGetHandleByIndex(0)).gpu)  # fmt: skip
        with open(release, "w"):
            pass
        rows = d.wait(ids, DONE, 60)
        rep.check("all eight COMPLETED", all(rows[i]["state"] == "COMPLETED" for i in ids),
                  {i: rows[i]["state"] for i in ids})  # fmt: skip
    finally:
        d.stop()
        rep.put("daemon_log_tail", d.tail())


def step_daemon_gap(rig: Rig, rep: Report) -> None:
    d = Daemon(rig)
    try:
        record = os.path.join(rig.work, "gap.jsonl")
        n = 20
        ids = [
            d.submit("-g", "1", "-J", f"gap{k}", "-D", rig.work, "--",
                     *rig.prog_argv(mem_gib=1, wait="seconds", seconds=2, record=record))
            for k in range(n)
        ]  # fmt: skip
        # until all have ended, or shortly before this step's limit: then what ended is measured
        deadline = float(os.environ.get(DEADLINE_ENV) or time.time() + 240) - 15
        rows = d.jobs()
        while not all(rows[i]["state"] in DONE for i in ids) and time.time() < deadline:
            time.sleep(0.2)
            rows = d.jobs()
        ended = [i for i in ids if rows[i]["state"] in DONE]
        rep.check(f"{n} one-GPU jobs COMPLETED", all(rows[i]["state"] == "COMPLETED" for i in ids),
                  {i: rows[i]["state"] for i in ids})  # fmt: skip
        if len(ended) < n:
            rep.put("cut_short", f"{len(ended)} of {n} ended before the step's limit")
            d.rig.berth("cancel", *[str(i) for i in ids if i not in ended])
        attempts = []
        for i in ended:
            a = (d.show(i).get("attempts") or [{}])[-1]
            attempts.append({"id": i, "start": a.get("start"), "end": a.get("end")})
        rep.put("attempts", attempts)
        by_time = sorted(attempts, key=lambda a: a["start"] or 0)
        daemon_gaps = [b["start"] - a["end"] for a, b in itertools.pairwise(by_time)
                       if a["end"] and b["start"]]  # fmt: skip
        events: dict[int, dict[str, dict[str, Any]]] = {}
        with open(record) as f:
            for line in f:
                e = json.loads(line)
                events.setdefault(e["pid"], {})[e["event"]] = e
        runs = sorted((e for e in events.values() if "start" in e and "end" in e),
                      key=lambda e: e["start"]["time"])  # fmt: skip
        proc_gaps = [b["start"]["t0"] - a["end"]["time"] for a, b in itertools.pairwise(runs)]
        gpu_gaps = [b["ready"]["time"] - a["end"]["time"] for a, b in itertools.pairwise(runs)
                    if "ready" in b]  # fmt: skip
        overlap = [b["start"]["t0"] < a["end"]["time"] for a, b in itertools.pairwise(runs)]
        ctx = [e["ready"]["cuda_s"] for e in runs if "ready" in e]
        imp = [e["ready"]["import_s"] for e in runs if "ready" in e]
        out = {
            "daemon_gap_ms (attempt end -> next attempt start)": summary_of(daemon_gaps),
            "process_gap_ms (last line of one -> first line of the next)": summary_of(proc_gaps),
            "gpu_idle_ms (last line of one -> next has CUDA context + 1 GiB)": summary_of(gpu_gaps),
            "torch_import_ms": summary_of(imp),
            "cuda_context_and_alloc_ms": summary_of(ctx),
            "makespan_s": round(runs[-1]["end"]["time"] - runs[0]["start"]["t0"], 2) if runs else None,
        }  # fmt: skip
        rep.put("gaps", out)
        rep.check("no two one-GPU jobs overlapped", not any(overlap), overlap)
        rep.check("daemon dispatch gap p50 under 1 s", bool(daemon_gaps)
                  and statistics.median(daemon_gaps) < 1.0, out)  # fmt: skip
    finally:
        d.stop()
        rep.put("daemon_log_tail", d.tail())


# A job's view of the GPUs' device files and of CUDA, under [daemon] isolate_devices: which
# files it can open (errno name, "ok" or "ENXIO": allowed but no device behind the node), and
# what CUDA does with the environment berth gave and with CUDA_VISIBLE_DEVICES removed.
PROBE = r"""
import errno, json, os, subprocess, sys
record, torch_ok, paths = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
out = {"job": os.environ.get("BERTH_JOB_ID"), "cvd": os.environ.get("CUDA_VISIBLE_DEVICES")}
with open("/proc/self/cgroup") as f:
    out["cgroup"] = f.read().strip()
opens = {}
for p in paths:
    try:
        os.close(os.open(p, os.O_RDWR))
        opens[p] = "ok"
    except OSError as e:
        opens[p] = errno.errorcode.get(e.errno, str(e.errno))
out["opens"] = opens
code = (
    "import json, torch\nn = torch.cuda.device_count()\ntry:\n"
    "    x = torch.ones(1024, 1024, device='cuda'); r = float((x @ x).sum().item())\n"
    "except Exception as e:\n    r = repr(e)[:300]\nprint(json.dumps({'count': n, 'matmul': r}))"
)
envs = {"as_given": dict(os.environ),
        "cvd_removed": {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}}
for label, env in envs.items() if torch_ok else ():
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    lines = r.stdout.strip().splitlines()
    out[label] = json.loads(lines[-1]) if lines else {"error": r.stderr.strip()[-400:]}
with open(record, "a") as f:
    f.write(json.dumps(out) + "\n")
"""


def step_isolate(rig: Rig, rep: Report) -> None:
    """[daemon] isolate_devices = "required" on the real /dev/nvidiaN (issue 37): a job given
    GPU 0 opens nvidia0 and runs CUDA; it cannot open another GPU's node (195:1, made here:
    with one GPU there is no real second one); a CPU-only job (-g 0) cannot open nvidia0 and
    CUDA finds no device even with CUDA_VISIBLE_DEVICES removed."""
    probe = os.path.join(rig.work, "probe.py")
    with open(probe, "w") as f:
        f.write(PROBE)
    nodes = os.path.join(rig.work, "nodes")
    os.makedirs(nodes, exist_ok=True)
    other = os.path.join(nodes, "nvidia1-stand-in")
    os.mknod(other, stat.S_IFCHR | 0o666, os.makedev(195, 1))
    paths = [f"/dev/{n}" for n in sorted(os.listdir("/dev")) if n.startswith("nvidia")
             and not os.path.isdir(f"/dev/{n}")]  # fmt: skip
    own = "/dev/nvidia0"
    if rig.fake:  # no driver: a 195:0 node stands in for /dev/nvidia0 too (ENXIO when allowed)
        own = os.path.join(nodes, "nvidia0-stand-in")
        os.mknod(own, stat.S_IFCHR | 0o666, os.makedev(195, 0))
        paths = [own]
    paths.append(other)
    rep.put("paths", paths)
    config = os.path.join(rig.work, "isolate.toml")
    with open(config, "w") as f:
        f.write('[daemon]\nisolate_devices = "required"\n')
    saved = rig.env.get("BERTH_CONFIG", "")
    rig.env["BERTH_CONFIG"] = config
    torch_ok = "1" if not rig.torch() else "0"
    try:
        d = Daemon(rig)
    except RuntimeError as e:
        rep.check('the daemon starts with isolate_devices = "required"', False, str(e)[-1500:])
        rig.env["BERTH_CONFIG"] = saved
        return
    try:
        rep.check('the daemon starts with isolate_devices = "required"', True)
        rep.put("daemon_log_head", d.tail()[:1500])
        record = os.path.join(rig.work, "isolate.jsonl")
        gpu = d.submit("-g", "1", "-J", "iso-gpu", "-D", rig.work, "--",
                       rig.python, probe, record, torch_ok, *paths)  # fmt: skip
        cpu = d.submit("-g", "0", "-J", "iso-cpu", "-D", rig.work, "--",
                       rig.python, probe, record, torch_ok, *paths)  # fmt: skip
        rows = d.wait([gpu, cpu], DONE, 150)
        rep.check("both probe jobs COMPLETED",
                  all(rows[i]["state"] == "COMPLETED" for i in (gpu, cpu)),
                  {i: rows[i]["state"] for i in (gpu, cpu)})  # fmt: skip
        seen = {}
        with open(record) as f:
            for line in f:
                e = json.loads(line)
                seen[int(e["job"])] = e
        rep.put("probes", seen)
        g, c = seen.get(gpu, {}), seen.get(cpu, {})
        allowed = {"ok", "ENXIO"}  # (ENXIO: the filter let it through, no device behind it)
        rep.check("the GPU job opens its own GPU's file", g.get("opens", {}).get(own) in allowed,
                  g.get("opens"))  # fmt: skip
        rep.check("the GPU job cannot open another GPU's file (195:1): EPERM",
                  g.get("opens", {}).get(other) == "EPERM", g.get("opens"))  # fmt: skip
        rep.check("the CPU-only job cannot open the GPU's file: EPERM",
                  c.get("opens", {}).get(own) == "EPERM", c.get("opens"))  # fmt: skip
        shared = [p for p in paths if p not in (own, other)]
        rep.check(
            "both open nvidiactl / nvidia-uvm (CUDA needs them)",
            all(g.get("opens", {}).get(p) in allowed for p in shared),
            g.get("opens"),
        )
        if torch_ok == "1":
            rep.check(
                "CUDA works in the GPU job (one device, a matmul)",
                g.get("as_given", {}).get("count") == 1
                and isinstance(g.get("as_given", {}).get("matmul"), float),
                g.get("as_given"),
            )
            rep.check(
                "the GPU job with CUDA_VISIBLE_DEVICES removed still sees one GPU",
                g.get("cvd_removed", {}).get("count") == 1,
                g.get("cvd_removed"),
            )
            rep.check(
                "the CPU-only job finds no CUDA device, CUDA_VISIBLE_DEVICES removed too",
                not isinstance(c.get("cvd_removed", {}).get("matmul"), float),
                {"as_given": c.get("as_given"), "cvd_removed": c.get("cvd_removed")},
            )
        else:
            rep.na("CUDA inside the jobs", rig.torch() or "")
    finally:
        d.stop()
        rep.put("daemon_log_tail", d.tail())
        rig.env["BERTH_CONFIG"] = saved


def step_latency(rig: Rig, rep: Report) -> None:
    minimal = os.path.join(rig.work, "min_nvml.py")
    with open(minimal, "w") as f:
        f.write(MIN_NVML)
    cmds: dict[str, list[str]] = {
        "python -c pass": [rig.python, "-c", "pass"],
        "berth status": rig.berth_argv("status"),
        "berth status --json": rig.berth_argv("status", "--json"),
        "berth select --max-procs 99": rig.berth_argv("select", "--max-procs", "99"),
        "minimal pynvml script": [rig.python, minimal],
    }
    smi = rig.smi()
    if smi:
        cmds["nvidia-smi"] = [smi]
        cmds["nvidia-smi --query-gpu csv"] = [smi, f"--query-gpu={SMI_GPU_FIELDS}",
                                              "--format=csv,noheader,nounits"]  # fmt: skip
    else:
        rep.na("nvidia-smi latency", "nvidia-smi not available")
    times: dict[str, list[float]] = {k: [] for k in cmds}
    fails: dict[str, str] = {}
    ratios: dict[str, float] = {}
    for _ in range(5):  # interleaved: drift hits every command alike
        for name, argv in cmds.items():
            t = time.perf_counter()
            r = subprocess.run(argv, env=rig.env, capture_output=True, timeout=60, check=False)
            times[name].append(time.perf_counter() - t)
            if r.returncode not in (0,) and name != "berth select --max-procs 99":
                fails[name] = r.stderr.decode(errors="replace")[-500:]
        rep.put("times_ms", {k: summary_of(v) for k, v in times.items()})
        med = {k: statistics.median(v) for k, v in times.items() if v}
        for base in ("nvidia-smi", "nvidia-smi --query-gpu csv", "minimal pynvml script"):
            if base in med:
                for mine in ("berth status", "berth status --json"):
                    ratios[f"{mine} / {base}"] = round(med[mine] / med[base], 2)
        rep.put("ratios", ratios)  # after every round: a step cut short keeps them
    rep.put("failures", fails)
    rep.check("every timed command succeeded", not fails, fails)


def step_ended(rig: Rig, rep: Report) -> None:
    import pynvml

    pynvml.nvmlInit()
    base = rig.memory_used()
    results = []
    with progs() as started:
        for how in ("exit", "kill -9", "exit", "kill -9"):
            p, _ = holder(rig, started, 1)
            pid = p.proc.pid
            listed = rig.pids_on_gpu() or {}
            if pid not in listed:
                results.append(
                    {"how": how, "error": "not listed while running", "listed": list(listed)}
                )
                p.close()
                continue
            t_ask = time.monotonic()
            if how == "exit":
                p.send("exit")
            else:
                p.kill()
            p.proc.wait()
            t_reaped = time.monotonic()
            gone = mem_back = None
            deadline = t_reaped + 20
            while time.monotonic() < deadline and (gone is None or mem_back is None):
                now = time.monotonic()
                pids = rig.pids_on_gpu()
                if gone is None and pids is not None and pid not in pids:
                    gone = now
                used = rig.memory_used()
                if (
                    mem_back is None
                    and used is not None
                    and base is not None
                    and used <= base + 64 * MiB
                ):
                    mem_back = now
                time.sleep(0.005)
            results.append({
                "how": how,
                "exit_to_reaped_ms": round((t_reaped - t_ask) * 1000, 1),
                "listed_after_reaped_ms": None if gone is None else round((gone - t_reaped) * 1000, 1),
                "memory_back_after_reaped_ms": None if mem_back is None
                else round((mem_back - t_reaped) * 1000, 1),
            })  # fmt: skip
            p.close()
            rep.put("runs", results)
    rep.check("the driver drops an ended process within 20 s",
              all(r.get("listed_after_reaped_ms") is not None for r in results), results)  # fmt: skip


def step_caching(rig: Rig, rep: Report) -> None:
    why = rig.torch()
    if why:
        rep.na("NVML while PyTorch's caching allocator holds freed memory", why)
        return
    import pynvml

    pynvml.nvmlInit()
    with progs() as started:
        base = rig.memory_used()
        p, ready = holder(rig, started, 10)
        pid = p.proc.pid
        phases = {"before": {"device_used_mib": None if base is None else base / MiB}}

        def note(name: str, event: dict[str, Any]) -> None:
            procs = rig.pids_on_gpu() or {}
            used = rig.memory_used()
            phases[name] = {
                "process_used_mib": None if procs.get(pid) is None else procs[pid] / MiB,
                "device_used_mib": None if used is None else used / MiB,
                "torch_allocated_mib": event.get("allocated", 0) / MiB,
                "torch_reserved_mib": event.get("reserved", 0) / MiB,
            }
            rep.put("phases", phases)

        note("10 GiB tensor", ready)
        p.send("free")
        note("tensor deleted (cached)", p.next_event("freed"))
        p.send("empty")
        note("after empty_cache()", p.next_event("emptied"))
        p.finish()
    held = phases["tensor deleted (cached)"]["process_used_mib"]
    emptied = phases["after empty_cache()"]["process_used_mib"]
    rep.check("NVML still counts memory the caching allocator holds (>= 10 GiB after del)",
              held is not None and held >= 10 * 1024, phases)  # fmt: skip
    rep.check("after empty_cache() NVML shows only the context (< 1 GiB)",
              emptied is not None and emptied < 1024, phases)  # fmt: skip


# (step, its time limit in seconds), in the order they run. daemon_gap, the longest, runs
# last and measures the jobs that ended before its limit (the run's budget may shorten it).
STEPS: dict[str, tuple[Callable[[Rig, Report], None], int]] = {
    "versions": (step_versions, 60),
    "status": (step_status, 90),
    "select": (step_select, 90),
    "acquire": (step_acquire, 90),
    "daemon_pack": (step_daemon_pack, 120),
    "ended": (step_ended, 60),
    "caching": (step_caching, 60),
    "latency": (step_latency, 90),
    "isolate": (step_isolate, 120),
    "daemon_gap": (step_daemon_gap, 200),
}


def new_rig(fake: bool) -> Rig:
    """A fresh work directory under /tmp (readable by all: the unprivileged user reaches the
    claims directory and the program) with the GPU program and a claims directory."""
    work = tempfile.mkdtemp(prefix="berth-gpu-", dir="/tmp")
    os.chmod(work, 0o755)
    rig = Rig(work, fake, uuidlib.uuid4().hex)  # with --fake: builds the library once
    os.makedirs(rig.claims_dir, mode=0o1777)
    os.chmod(rig.claims_dir, 0o1777)
    with open(rig.prog, "w") as f:
        f.write(PROG)
    os.chmod(rig.prog, 0o644)
    return rig


# -- the orchestrator ------------------------------------------------------------------------


def run_step(name: str, work: str, fake: bool, mark: str) -> int:
    """In the child: run one step, its report in ``work/steps/NAME.json``."""
    rig = Rig(work, fake, mark)  # this process was started with the rig's environment
    os.environ.update(
        {k: rig.env[k] for k in ("BERTH_CONFIG", "BERTH_CLAIMS_DIR", "BERTH_STATE_DIR")}
    )
    rep = Report(os.path.join(work, "steps", f"{name}.json"))
    fn, _ = STEPS[name]
    try:
        from berth.devices import nvml

        nvml.session()  # NVML started as berth starts it: its message when there is no driver
        fn(rig, rep)
        rep.status = "ok" if all(c["ok"] is not False for c in rep.checks) else "fail"
    except Exception as e:
        rep.status = "error"
        rep.data["error"] = f"{type(e).__name__}: {e}"
        rep.data["traceback"] = traceback.format_exc()[-4000:]
    rep.save()
    return 0


def kill_marked(mark: str) -> list[int]:
    """Kill every process (but this one) whose environment carries this run's mark."""
    killed = []
    needle = f"{MARK}={mark}".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            os.kill(int(name), signal.SIGKILL)
            killed.append(int(name))
        except (OSError, ProcessLookupError):
            continue
    return killed


def render(results: dict[str, Any]) -> str:
    lines = [
        "# berth on a real GPU (bench/real_gpu.py)",
        "",
        f"mode: **{results['mode']}**; started {results['started']}; "
        f"{results.get('elapsed_s', '?')} s so far; host {results['host']}",
        "",
        "| step | status | s | checks passed / failed / not available |",
        "|---|---|---|---|",
    ]
    for name, step in results["steps"].items():
        checks = step.get("checks", [])
        ok = sum(1 for c in checks if c["ok"] is True)
        bad = sum(1 for c in checks if c["ok"] is False)
        na = sum(1 for c in checks if c["ok"] is None)
        lines.append(
            f"| {name} | {step['status']} | {step.get('seconds', '')} | {ok} / {bad} / {na} |"
        )
    for name, step in results["steps"].items():
        lines += ["", f"## {name}: {step['status']}", ""]
        if step.get("data", {}).get("error"):
            lines += ["```", str(step["data"]["error"])[:2000], "```", ""]
        for c in step.get("checks", []):
            mark = {True: "ok", False: "**FAIL**", None: "n/a"}[c["ok"]]
            detail = "" if c["ok"] is True else f": `{json.dumps(c['detail'], default=str)[:300]}`"
            lines.append(f"- {mark} {c['name']}{detail}")
        data = step.get("data", {})
        for key in ("system", "gpus", "torch", "nvidia_ml_py", "nvidia_smi_version", "gaps",
                    "times_ms", "ratios", "runs", "phases", "per_process_over_8GiB_mib",
                    "ready_seconds", "memory_used_mib", "root_memory_gpu0",
                    "unprivileged_sees_holder", "unprivileged_used_memory_is_null",
                    "probes", "dev_nvidia", "doctor"):  # fmt: skip
            if key in data:
                text = json.dumps(data[key], default=str, indent=1)
                lines += ["", f"{key}:", "```json", text[:3000], "```"]
    return "\n".join(lines) + "\n"


def write_atomic(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def orchestrate(args: argparse.Namespace) -> int:
    os.makedirs(args.out, exist_ok=True)
    rig = new_rig(args.fake)
    work, mark = rig.work, rig.mark
    os.makedirs(os.path.join(work, "steps"))
    t_start = time.monotonic()
    rig.env[TORCH_ENV] = rig.torch() or ""
    names = list(STEPS) if not args.steps else args.steps.split(",")
    unknown = [n for n in names if n not in STEPS]
    if unknown:
        print(f"unknown steps {unknown}; known: {', '.join(STEPS)}", file=sys.stderr)
        return 2
    results: dict[str, Any] = {
        "mode": "fake" if args.fake else "real",
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "host": os.uname().nodename,
        "work": work,
        "steps": {},
    }
    json_path = os.path.join(args.out, "results.json")
    md_path = os.path.join(args.out, "summary.md")

    def flush() -> None:
        results["elapsed_s"] = round(time.monotonic() - t_start, 1)
        write_atomic(json_path, json.dumps(results, indent=1, default=str))
        write_atomic(md_path, render(results))

    for name in names:
        left = args.budget - (time.monotonic() - t_start)
        limit = min(STEPS[name][1], left)
        if limit < 10:
            results["steps"][name] = {"status": "not run: out of time", "checks": [], "data": {}}
            flush()
            continue
        print(f"[real_gpu] {name} (limit {limit:.0f} s) ...", flush=True)
        env = {k: v for k, v in rig.env.items() if k != "BERTH_SOCKET"}
        env[DEADLINE_ENV] = str(time.time() + limit)
        t = time.monotonic()
        child = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--run-step", name, "--work", work,
             "--mark", mark, *(["--fake"] if args.fake else [])],
            env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        try:
            output, _ = child.communicate(timeout=limit)
            timed_out = False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            output, _ = child.communicate()
            timed_out = True
        killed = kill_marked(mark)
        step_file = os.path.join(work, "steps", f"{name}.json")
        try:
            with open(step_file) as f:
                step: dict[str, Any] = json.load(f)
        except (OSError, ValueError):
            step = {"status": "error", "checks": [], "data": {"error": "the step left no report"}}
        if timed_out:
            step["status"] = f"timeout after {limit:.0f} s (what it had is kept)"
        step["seconds"] = round(time.monotonic() - t, 1)
        if output.strip():
            step.setdefault("data", {})["output"] = output[-3000:]
        if killed:
            step.setdefault("data", {})["killed_after"] = killed
        results["steps"][name] = step
        flush()
        print(f"[real_gpu] {name}: {step['status']} in {step['seconds']} s", flush=True)
    flush()
    failed = [n for n, s in results["steps"].items() if s["status"] != "ok"]
    print(f"[real_gpu] done in {results['elapsed_s']} s; see {md_path}; "
          f"not ok: {', '.join(failed) or 'none'}", flush=True)  # fmt: skip
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if not failed else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--out", help="directory for results.json and summary.md")
    p.add_argument("--fake", action="store_true", help="rehearse against tests/fakenvml")
    p.add_argument("--budget", type=float, default=300, help="seconds for all steps (300)")
    p.add_argument("--steps", default="", help=f"comma-separated, of: {','.join(STEPS)}")
    p.add_argument("--keep", action="store_true", help="keep the temp work directory")
    p.add_argument("--run-step", help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    p.add_argument("--mark", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.run_step:
        return run_step(args.run_step, args.work, args.fake, args.mark)
    if not args.out:
        p.error("--out DIR is required")
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
