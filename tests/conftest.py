"""Shared fixtures: the fake-GPU rig every test area uses (see docs/testing.md).

Session set-up (automatic): ``tests/fakenvml/fakenvml.c`` is compiled (only when it changed)
into ``tests/fakenvml/build/<hash>/libnvidia-ml.so.1`` and preloaded into the test process with
``ctypes.CDLL(path, RTLD_GLOBAL)``. pynvml's own ``CDLL("libnvidia-ml.so.1")`` then resolves
to that already-loaded object by its SONAME, so in-process NVML calls go through the real
pynvml code into the fake; product code is untouched. Subprocesses find it through
``LD_LIBRARY_PATH`` (in ``fake_gpus.env``).

Fixtures:

``fake_gpus`` (function scope) -> :class:`FakeGpus`, a private temp directory with:

- ``.setup(n=4, memory="80G", name="NVIDIA A100-SXM4-80GB", **fields)``: write a state with
  n idle GPUs (call it first: until then there is no state file, i.e. "driver not loaded").
- ``.update(index, **fields)``: change a GPU's fields (``power_mw=None``: not supported);
  ``.inject(index, function, error)``: make an NVML function fail on that GPU
  (``index=None``: system-wide; ``error=None`` clears); ``.remove_state()``: no driver.
- ``.spawn_workload(visible="1", mem="10G", util=50, seconds=None, env=None, args=())``:
  start tests/fakenvml/workload.py with that ``CUDA_VISIBLE_DEVICES`` and return its Popen
  once NVML lists it on its GPUs (killed with its process group at teardown).
  ``.workload_cmd(*args)``: the argv of the workload, to run under ``berth run -- ...``.
- ``.berth(*args, env=None, input=None, timeout=30)``: run the CLI in a subprocess with
  ``.env``; returns ``subprocess.CompletedProcess`` (text stdout/stderr).
- ``.env``: ``os.environ`` plus LD_LIBRARY_PATH, FAKE_NVML_STATE, FAKE_NVML_PROCS,
  BERTH_CONFIG="" (no config file), BERTH_CLAIMS_DIR, BERTH_STATE_DIR, BERTH_SOCKET (all in
  the temp dir), without CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER. The same variables are set
  in ``os.environ`` for in-process calls (undone at teardown); ``berth.config`` and the NVML
  session are reset before and after each test.
- ``.state_path``, ``.procs_dir``, ``.claims_dir``, ``.state_dir``, ``.socket``, ``.root``,
  ``.uuids`` (after setup), ``.read()`` / ``.write(state)`` for the raw JSON.

``fakenvml_lib_dir`` (session scope): the directory holding the fake library.

Wait for things with ``from helpers import wait_until`` (tests/helpers.py), never sleep.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until

TESTS = Path(__file__).resolve().parent

# A run started in the background by a shell (`pytest &`, `nohup ... &`) has SIGINT ignored, and
# every process it starts inherits that: then `berth watch` or `status --watch` cannot be
# stopped with Ctrl-C as the tests stop them (each waited out its timeout). A handled signal is
# reset to its default in a child at exec, so handling it here gives them back Ctrl-C.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _load_builder() -> Any:
    """tests/fakenvml/build.py, loaded by path (not a package, and `build` is a common name)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fakenvml_build", TESTS / "fakenvml" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _compile_berth() -> None:
    """Byte-compile berth's modules (only those changed since), as pip leaves an installed
    berth. The suite starts thousands of Python processes (the CLI, ~450 daemons, their fork
    servers): with ``PYTHONDONTWRITEBYTECODE`` set (as on the shared test machine), and berth
    installed editable, each compiled every module it imported from source at every start
    (~0.25 s of CPU a daemon, ~35 ms a CLI command). ``py_compile`` writes whatever that
    variable says; the interpreters still check each ``.pyc`` against its source."""
    import compileall

    compileall.compile_dir(str(TESTS.parent / "berth"), quiet=1)


_compile_berth()
_builder = _load_builder()
LIBNAME: str = _builder.LIBNAME

WORKLOAD = str(TESTS / "fakenvml" / "workload.py")
# Real A100 boxes (DGX) put their GPUs on these buses; NVML index order is PCI bus order.
_BUSES = [0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD]
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def size(value: str | int) -> int:
    """``"80G"`` -> bytes (binary units); ints are bytes."""
    if isinstance(value, int):
        return value
    raw = value.strip().lower().removesuffix("b").removesuffix("i")
    number = raw.rstrip("kmgt")
    return int(float(number) * _UNITS[raw[len(number) :]])


def fake_uuid(index: int) -> str:
    h = hashlib.md5(f"berth-fake-gpu-{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def fake_bus_id(index: int) -> str:
    bus = _BUSES[index] if index < len(_BUSES) else 0xC0 + index
    return f"00000000:{bus:02X}:00.0"


class FakeGpus:
    """The fake-GPU rig of one test (see the module docstring)."""

    def __init__(self, root: Path, lib_dir: str) -> None:
        self.root = root
        self.lib_dir = lib_dir
        self.state_path = str(root / "nvml.json")
        self.procs_dir = str(root / "nvml.procs")
        self.claims_dir = str(root / "claims")
        self.state_dir = str(root / "state")
        self.socket = str(root / "berth.sock")
        self.workload = WORKLOAD
        ld = os.environ.get("LD_LIBRARY_PATH")
        self.vars = {
            "LD_LIBRARY_PATH": lib_dir + (os.pathsep + ld if ld else ""),
            "FAKE_NVML_STATE": self.state_path,
            "FAKE_NVML_PROCS": self.procs_dir,
            "BERTH_CONFIG": "",
            "BERTH_CLAIMS_DIR": self.claims_dir,
            "BERTH_STATE_DIR": self.state_dir,
            "BERTH_SOCKET": self.socket,
            "BERTH_PTS_DIR": str(root / "pts"),  # (notices to terminals: not the host's)
        }
        self.env: dict[str, str] = {**os.environ, **self.vars}
        for name in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
            self.env.pop(name, None)
        self._procs: list[subprocess.Popen[str]] = []

    # -- the state file ------------------------------------------------------------------

    def read(self) -> dict[str, Any]:
        with open(self.state_path) as f:
            state: dict[str, Any] = json.load(f)
        return state

    def write(self, state: Mapping[str, Any]) -> None:
        """Replace the state atomically (the fake library re-reads it on every call)."""
        tmp = f"{self.state_path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(state, f, indent=1)
        os.replace(tmp, self.state_path)

    def setup(
        self,
        n: int = 4,
        memory: str | int = "80G",
        name: str = "NVIDIA A100-SXM4-80GB",
        driver: str = "550.54.15",
        **fields: Any,
    ) -> FakeGpus:
        """Write a state with ``n`` idle GPUs; ``fields`` apply to each (None: unsupported)."""
        gpus = []
        for i in range(n):
            gpu: dict[str, Any] = {
                "uuid": fake_uuid(i),
                "name": name,
                "pci_bus_id": fake_bus_id(i),
                "memory_total": size(memory),
                "memory_used": 0,
                "util": 0,
                "mem_util": 0,
                "power_mw": 60000,
                "power_limit_mw": 400000,
                "temp": 35,
                "pstate": 0,
                "fan": 30,
                "clocks_event_reasons": 1,  # idle
                "processes": [],
                "errors": {},
            }
            gpu.update(fields)
            gpus.append({k: v for k, v in gpu.items() if v is not None})
        self.write({"driver": driver, "cuda": 12040, "errors": {}, "gpus": gpus})
        return self

    @property
    def uuids(self) -> list[str]:
        return [g["uuid"] for g in self.read()["gpus"]]

    def update(self, index: int, **fields: Any) -> None:
        """Change GPU ``index``'s fields; a value of None removes it (NOT_SUPPORTED)."""
        state = self.read()
        gpu = state["gpus"][index]
        for key, value in fields.items():
            if key in ("memory_total", "memory_used") and isinstance(value, str):
                value = size(value)
            if value is None:
                gpu.pop(key, None)
            else:
                gpu[key] = value
        self.write(state)

    def inject(self, index: int | None, function: str, error: str | int | None) -> None:
        """Make ``function`` (e.g. "nvmlDeviceGetPowerUsage", or "*") fail with ``error``
        ("NOT_SUPPORTED", "GPU_IS_LOST", "UNKNOWN", "NO_PERMISSION", ...) on GPU ``index``
        (None: system-wide, e.g. "nvmlInitWithFlags"); ``error=None`` removes the injection."""
        state = self.read()
        errors = (
            state.setdefault("errors", {})
            if index is None
            else state["gpus"][index].setdefault("errors", {})
        )
        if error is None:
            errors.pop(function, None)
        else:
            errors[function] = error
        self.write(state)

    def remove_state(self) -> None:
        """No state file: nvmlInit fails with DRIVER_NOT_LOADED."""
        os.unlink(self.state_path)

    # -- processes -----------------------------------------------------------------------

    def workload_cmd(self, *args: str) -> list[str]:
        return [sys.executable, WORKLOAD, *args]

    def spawn_workload(
        self,
        visible: str | None = "1",
        mem: str | int = "10G",
        util: int = 50,
        seconds: float | None = None,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
    ) -> subprocess.Popen[str]:
        """Start a fake workload on the GPUs ``visible`` names (as CUDA_VISIBLE_DEVICES; None
        leaves it unset: all GPUs); return once NVML lists it. Killed at teardown."""
        cmd = self.workload_cmd("--mem", str(mem), "--util", str(util), *args)
        if seconds is not None:
            cmd += ["--seconds", str(seconds)]
        full_env = dict(self.env)
        if visible is not None:
            full_env["CUDA_VISIBLE_DEVICES"] = visible
        full_env.update(env or {})
        proc = subprocess.Popen(
            cmd,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self._procs.append(proc)
        registration = os.path.join(self.procs_dir, str(proc.pid))

        def registered() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"workload exited with {proc.returncode} before registering: "
                    f"{proc.stderr.read() if proc.stderr else ''}"
                )
            return os.path.exists(registration)

        wait_until(registered, timeout=15, message=f"workload {proc.pid} to register")
        return proc

    def berth(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        timeout: float = 30,
        cwd: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``berth ARGS...`` in a subprocess with ``.env`` (plus ``env``)."""
        return subprocess.run(
            [sys.executable, "-m", "berth.cli.main", *args],
            env={**self.env, **(env or {})},
            cwd=cwd,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def cleanup(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream:
                    stream.close()
        self._sweep_workloads()
        from berth.daemon.procs.cgroup import remove_all

        remove_all(self.state_dir)  # (a daemon's supervisors' cgroups, if one made them)

    def _sweep_workloads(self) -> None:
        """Kill fake workloads this test started by other means (under `berth run`, queued
        jobs) that outlived it, so a failed test leaves no process behind."""
        try:
            names = os.listdir(self.procs_dir)
        except FileNotFoundError:
            return
        for name in names:
            if not name.isdigit():
                continue
            pid = int(name)
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"workload.py" not in f.read():
                        continue  # the pid was reused by something else
                os.kill(pid, signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                pass


def _reset_berth() -> None:
    """Forget cached config and the NVML session (only if those modules were imported)."""
    for module, func in (("berth.config", "reset"), ("berth.devices.nvml", "reset")):
        mod = sys.modules.get(module)
        if mod is not None and hasattr(mod, func):
            getattr(mod, func)()


@pytest.fixture(scope="session", autouse=True)
def fakenvml_lib_dir() -> str:
    lib_dir: str = _builder.build()
    ctypes.CDLL(os.path.join(lib_dir, LIBNAME), mode=ctypes.RTLD_GLOBAL)
    return lib_dir


@pytest.fixture
def fake_gpus(
    tmp_path: Path, fakenvml_lib_dir: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeGpus]:
    rig = FakeGpus(tmp_path, fakenvml_lib_dir)
    for name, value in rig.vars.items():
        monkeypatch.setenv(name, value)
    for name in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        # set, then delete: monkeypatch then restores the variable as it was before the test
        # (absent too) even when the code under test sets it (gpuselect(), acquire())
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    _reset_berth()
    try:
        yield rig
    finally:
        rig.cleanup()
        _reset_berth()
