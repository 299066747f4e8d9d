"""A fake GPU workload for berth's tests: it "uses" the GPUs CUDA would give it.

It resolves ``CUDA_VISIBLE_DEVICES`` against the fake NVML state the way the CUDA runtime
does, registers itself on those GPUs in the fake library's process directory (so NVML lists
it with its memory and utilisation), runs, and unregisters on a normal exit. After
``kill -9`` nothing is unregistered: the fake library drops it because the pid is dead.

    python tests/fakenvml/workload.py --mem 10G --util 50 --seconds 5 \\
        --record /tmp/record.jsonl --exit-code 0

Environment: ``FAKE_NVML_STATE`` (the state JSON), ``FAKE_NVML_PROCS`` (default
``<state>.procs``), ``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER``.

CUDA semantics implemented here (independently of berth, so tests are not circular): unset
means all GPUs; empty means none; a comma list of indices or ``GPU-`` UUIDs (a unique prefix
is enough); parsing stops at the first token that is invalid, out of range, ambiguous or a
duplicate. Indices count GPUs in PCI bus order (``CUDA_DEVICE_ORDER=PCI_BUS_ID``); the fake
GPUs are all equally fast, so ``FASTEST_FIRST`` (CUDA's default) gives the same order. MIG
ids are not modelled (the fake has no MIG devices) and stop parsing.

With no visible GPU it fails like a CUDA program: a message on stderr and exit code 100
(``--allow-no-gpu`` runs anyway).

``--record FILE`` appends one JSON line at start and one at the end:
``{"event": "start"|"end", "pid", "time", "gpus": [uuid...], "cvd", "job", "exit"|"signal"}``
so tests can prove that no two jobs overlapped on a GPU. ``--print`` writes the start record
to stdout too.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """``10G`` / ``512MiB`` / ``1024`` (bytes) -> bytes (binary units)."""
    raw = text.strip().lower().removesuffix("b").removesuffix("i")
    number = raw.rstrip("kmgt")
    return int(float(number) * _UNITS[raw[len(number) :]])


def visible_gpus(gpus: list[dict[str, object]], environ: dict[str, str]) -> list[str]:
    """The UUIDs CUDA would expose, in CUDA device order."""
    ordered = sorted(gpus, key=lambda g: str(g.get("pci_bus_id", "")).lower())
    uuids = [str(g["uuid"]) for g in ordered]
    value = environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return uuids
    chosen: list[str] = []
    for raw in value.split(","):
        token = raw.strip()
        if token.isdigit() and int(token) < len(uuids):
            match = [uuids[int(token)]]
        elif token.startswith("GPU-"):
            match = [u for u in uuids if u.startswith(token)]
        else:
            match = []
        if len(match) != 1 or match[0] in chosen:
            break
        chosen.append(match[0])
    return chosen


def _procs_dir(state_path: str) -> str:
    return os.environ.get("FAKE_NVML_PROCS") or state_path + ".procs"


def register(
    procs_dir: str, uuids: list[str], mem: int, util: int, mem_util: int, kind: str
) -> str:
    os.makedirs(procs_dir, exist_ok=True)
    path = os.path.join(procs_dir, str(os.getpid()))
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.writelines(f"{u} {mem} {util} {mem_util} {kind}\n" for u in uuids)
    os.replace(tmp, path)
    return path


def record(path: str | None, event: dict[str, object], echo: bool = False) -> None:
    line = json.dumps(event) + "\n"
    if echo:
        sys.stdout.write(line)
        sys.stdout.flush()
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mem", default="1G", help="memory used on each GPU (10G, 512M, bytes)")
    p.add_argument("--util", type=int, default=50, help="GPU utilisation %% added per GPU")
    p.add_argument("--mem-util", type=int, default=0, help="memory-bandwidth utilisation %%")
    p.add_argument("--kind", choices=["compute", "graphics", "compute+graphics"], default="compute")
    p.add_argument("--seconds", type=float, default=None, help="run time (default: until killed)")
    p.add_argument("--exit-code", type=int, default=0)
    p.add_argument("--record", default=None, help="append start/end JSON lines to this file")
    p.add_argument("--print", action="store_true", help="print the start record to stdout")
    p.add_argument("--children", type=int, default=0, help="spawn N child processes")
    p.add_argument("--child-mem", default=None, help="children register with this memory")
    p.add_argument("--ignore-term", action="store_true", help="ignore SIGTERM (test kill -9)")
    p.add_argument("--allow-no-gpu", action="store_true")
    args = p.parse_args(argv)

    state_path = os.environ.get("FAKE_NVML_STATE", "")
    try:
        with open(state_path) as f:
            gpus = json.load(f).get("gpus", [])
    except OSError as e:
        sys.stderr.write(f"workload: no fake NVML state ({state_path!r}): {e}\n")
        return 100
    uuids = visible_gpus(gpus, dict(os.environ))
    if not uuids and not args.allow_no_gpu:
        sys.stderr.write(
            "workload: no CUDA-capable device is detected "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})\n"
        )
        return 100

    base = {
        "pid": os.getpid(),
        "gpus": uuids,
        "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "job": os.environ.get("BERTH_JOB_ID"),
    }
    registration: str | None = None

    # Handlers first: a signal that comes right after registration must still unregister.
    def finish(event: dict[str, object]) -> None:
        if registration:
            try:
                os.unlink(registration)
            except FileNotFoundError:
                pass
        record(args.record, {"event": "end", "time": time.time(), **base, **event})

    def on_signal(signum: int, frame: object) -> None:
        finish({"signal": signum})
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if args.ignore_term else on_signal)

    # Register and record the start as one step: a signal in between waits until both are done.
    blocked = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    if uuids:
        registration = register(
            _procs_dir(state_path), uuids, parse_size(args.mem), args.util, args.mem_util, args.kind
        )
    record(args.record, {"event": "start", "time": time.time(), **base}, echo=args.print)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)

    children = []
    if args.children:
        child_args = ["--seconds", str(args.seconds)] if args.seconds is not None else []
        if args.child_mem is not None:
            child_args += ["--mem", args.child_mem, "--util", "0"]
        else:
            child_args += ["--allow-no-gpu"]
        child_env = dict(os.environ)
        if args.child_mem is None:
            child_env["CUDA_VISIBLE_DEVICES"] = ""
        for _ in range(args.children):
            children.append(
                subprocess.Popen([sys.executable, __file__, *child_args], env=child_env)
            )


    if args.seconds is None:
        while True:
            signal.pause()
    time.sleep(args.seconds)
    for child in children:
        child.wait()
    finish({"exit": args.exit_code})
    return args.exit_code


if __name__ == "__main__":
    sys.exit(main())
