"""`berth mcp`: berth's commands as MCP tools, driven by the MCP SDK's own client over stdio
(issue 24.7). The tools run the commands as the user who started the server: an agent gets
exactly its user's authority (another user's job is refused, as for the CLI)."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from test_system_mode import System
from userkit import A, B

import berth

TOOLS = {"gpu_status", "select_gpus", "submit_job", "list_queue", "show_job", "job_logs",
         "cancel_job", "wait_job", "why_pending"}  # fmt: skip


def _server(env: dict[str, str], user: str | None = None) -> StdioServerParameters:
    argv = [sys.executable, "-m", "berth", "mcp"]
    if user is None:
        return StdioServerParameters(command=argv[0], args=argv[1:], env=env)
    # As another user: this interpreter lives under /root, which they cannot enter; Debian's
    # own of the same version runs berth from this checkout and this venv's packages.
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    assert os.access(python, os.X_OK), f"{python}: needed to run the server as {user}"
    paths = [str(Path(berth.__file__).parents[1]), *(p for p in sys.path if "site-packages" in p)]
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    pairs = [f"{k}={v}" for k, v in env.items()] + [f"PYTHONPATH={os.pathsep.join(paths)}"]
    return StdioServerParameters(
        command=runuser, args=["-u", user, "--", "env", *pairs, python, *argv[1:]], env={},
        cwd="/",
    )  # fmt: skip


def _session(params: StdioServerParameters, calls: list[tuple[str, dict[str, Any]]]) -> Any:
    """Each call's (is_error, structured or text result), in order, over one connection."""

    async def go() -> Any:
        async with Client(params, read_timeout_seconds=60) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            out = [names]
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                text = "".join(getattr(c, "text", "") for c in result.content)
                out.append((result.is_error, result.structured_content, text))
            return out

    return asyncio.run(go())


def _env(daemon: Any) -> dict[str, str]:
    return {k: v for k, v in daemon.env.items() if k.startswith(("BERTH_", "FAKE_NVML", "LD_"))
            } | {"PATH": os.environ["PATH"], "HOME": "/root"}  # fmt: skip


def test_an_agent_sees_submits_follows_and_cancels(daemon):
    daemon.start()
    held = daemon.submit("true", hold=True)
    secret = {"AGENT_API_TOKEN": "sk-dry-run-must-not-echo"}  # (the server's environment)
    names, status, dry, sub, waited, logs, why, cancel, bad = _session(_server(_env(daemon) | secret), [
        ("gpu_status", {}),
        ("submit_job", {"command": ["sh", "-c", "echo from-agent"], "dry_run": True}),
        ("submit_job", {"command": ["sh", "-c", "echo from-agent"], "time": "5"}),
        ("wait_job", {"job_id": str(held + 1), "timeout_seconds": 30}),
        ("job_logs", {"job_id": str(held + 1), "lines": 5}),
        ("why_pending", {"job_id": str(held)}),
        ("cancel_job", {"job_id": str(held)}),
        ("show_job", {"job_id": "999"}),
    ])  # fmt: skip
    assert TOOLS <= names
    assert not status[0] and "from-agent" not in status[2] and '"gpus"' in status[2]
    assert not dry[0] and '"dry_run": true' in dry[2].replace("True", "true").lower()
    assert f'"would_be": {held + 1}' in dry[2] and '"env_vars"' in dry[2]  # the daemon's answer
    assert "sk-dry-run-must-not-echo" not in dry[2] and "AGENT_API_TOKEN" not in dry[2]
    assert not sub[0] and f'"job_id": {held + 1}' in sub[2]
    assert not waited[0] and '"ended": true' in waited[2].lower() and "COMPLETED" in waited[2]
    assert "from-agent" in logs[2]
    assert not why[0] and "PENDING" in why[2] and "Held" in why[2]
    assert not cancel[0]
    assert bad[0] and "999" in bad[2]  # the command's own message, as an error
    states = {j["id"]: j["state"] for j in daemon.call("queue", all=True)["jobs"]}
    assert states[held] == "CANCELLED" and states[held + 1] == "COMPLETED"
    assert len(states) == 2  # the dry run queued nothing


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")
def test_an_agent_has_its_users_authority_only(daemon):
    system = System(daemon)
    system.start()
    theirs = system.submit(A, "--hold", "--", "true")
    env = {**system.env, "PATH": os.environ["PATH"], **{k: v for k, v in daemon.env.items()
                                                          if k.startswith(("FAKE_NVML", "LD_"))}}
    _, cancel, mine = _session(_server(env, user=B), [
        ("cancel_job", {"job_id": str(theirs)}),
        ("submit_job", {"command": ["true"], "dry_run": True}),
    ])  # fmt: skip
    assert cancel[0] and f"job {theirs}" in cancel[2] and A in cancel[2], cancel
    assert not mine[0]
    assert daemon.call("queue", all=True)["jobs"][0]["state"] == "PENDING"
