"""Helpers of the claims tests: logical GPU snapshots and processes that hold claims."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from berth.devices.model import GpuSnapshot

HOLDER = str(Path(__file__).with_name("holder.py"))
GIB = 1 << 30


def logical(n: int = 4, memory: int = 80 * GIB) -> list[GpuSnapshot]:
    return [
        GpuSnapshot(
            i, f"LOGICAL-{i}", "logical GPU", memory_total=memory, processes=None, logical=True
        )
        for i in range(n)
    ]


class Holders:
    """Start processes that hold claims (tests/claims/holder.py); all killed at teardown."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.procs: list[subprocess.Popen[str]] = []

    def start(
        self, uuids: list[str], share: float = 1.0, mem: int | None = None
    ) -> subprocess.Popen[str]:
        args = [sys.executable, HOLDER, self.path, ",".join(uuids), str(share)]
        if mem is not None:
            args.append(str(mem))
        p = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        self.procs.append(p)
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.startswith("held"), f"holder could not claim {uuids}: {line!r}"
        return p

    def cleanup(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            for f in (p.stdin, p.stdout):
                if f:
                    f.close()
