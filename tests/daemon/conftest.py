"""A real berth daemon in a temporary directory, over fake GPUs, talked to over its socket.

``daemon`` (fixture) -> :class:`DaemonRig`: ``.start(*flags)``, ``.client()``,
``.call(kind, **fields)``, ``.submit(*argv, **job)``, ``.job(id)``, ``.wait_done(ids)``,
``.kill9()``, ``.berth(*args)`` (the CLI in a subprocess), ``.workload(*args)`` (argv of the
fake GPU workload). Teardown kills the daemon and every supervisor and job it left.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import wait_until

from berth.client import Client
from berth.errors import BerthError

WORKLOAD = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fakenvml", "workload.py")


class DaemonRig:
    def __init__(self, fake_gpus: Any) -> None:
        self.fake = fake_gpus
        # UNIX socket paths are limited to 108 bytes: keep it short.
        self.sockdir = tempfile.mkdtemp(prefix="bd-", dir="/tmp")
        self.socket = os.path.join(self.sockdir, "d.sock")
        self.state_dir = fake_gpus.state_dir
        self.env = {**fake_gpus.env, "BERTH_SOCKET": self.socket}
        os.environ["BERTH_SOCKET"] = self.socket
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = os.path.join(fake_gpus.root, "daemon.out")
        self.record = os.path.join(fake_gpus.root, "record.jsonl")

    def start(self, *flags: str, gpus: int | None = 4) -> None:
        if gpus is not None and not os.path.exists(self.fake.state_path):
            self.fake.setup(n=gpus, memory="80G")
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "berth.cli.main", "daemon", "--foreground", *flags],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_until(self._answers, timeout=15, message="daemon answers")

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            with open(self.log) as f:
                raise AssertionError(f"daemon exited {self.proc.returncode}:\n{f.read()}")
        try:
            self.call("ping")
            return True
        except BerthError:
            return False

    def client(self) -> Client:
        return Client(self.socket)

    def call(self, kind: str, **fields: Any) -> dict[str, Any]:
        with self.client() as c:
            return c.call(kind, **fields)

    def workload(self, *args: str) -> list[str]:
        return [sys.executable, WORKLOAD, *args]

    def submit(self, *argv: str, **job: Any) -> int:
        spec = {"argv": list(argv), "env": self.env, "cwd": str(self.fake.root), **job}
        if "wrap" in job:
            del spec["argv"]
        reply = self.call("submit", job=spec)
        return int(reply["job_id"])

    def job(self, job_id: int) -> dict[str, Any]:
        job: dict[str, Any] = self.call("show", job_id=job_id)["job"]
        return job

    def wait_done(self, ids: list[int], timeout: float = 30) -> dict[int, dict[str, Any]]:
        finished = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "LOST"}

        def done() -> dict[int, dict[str, Any]] | None:
            rows = {r["id"]: r for r in self.call("queue", all=True)["jobs"]}
            if all(i in rows and rows[i]["state"] in finished for i in ids):
                return {i: rows[i] for i in ids}
            return None

        return wait_until(done, timeout=timeout, interval=0.05, message=f"jobs {ids} end")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def berth(
        self, *args: str, timeout: float = 30, cwd: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "berth.cli.main", *args],
            env=self.env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        run_dir = os.path.join(self.state_dir, "run")
        if os.path.isdir(run_dir):
            from berth.daemon.supervisor.runfile import read_run_file

            for name in os.listdir(run_dir):
                if not name.replace(".", "").isdigit():
                    continue
                info = read_run_file(os.path.join(run_dir, name))
                for key, kill in (("job", os.killpg), ("sup", os.kill)):
                    pid = info.get(key)
                    if pid:
                        try:
                            kill(pid, signal.SIGKILL)
                        except (ProcessLookupError, PermissionError):
                            pass
        from berth.daemon.procs.cgroup import remove_all

        remove_all(self.state_dir)  # (the cgroups of its supervisors, where it made them)
        shutil.rmtree(self.sockdir, ignore_errors=True)


@pytest.fixture
def daemon(fake_gpus: Any) -> Iterator[DaemonRig]:
    rig = DaemonRig(fake_gpus)
    try:
        yield rig
    finally:
        rig.cleanup()
