"""`berth mcp`: berth's commands as MCP tools, driven by the MCP SDK's own client over stdio
(issue 24.7). The tools run the commands as the user who started the server: an agent gets
exactly its user's authority (another user's job is refused, as for the CLI)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import pytest
from helpers import wait_until
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from test_system_mode import System
from userkit import A, B, python_as

TOOLS = {"gpu_status", "select_gpus", "submit_job", "list_queue", "show_job", "job_logs",
         "cancel_job", "wait_job", "why_pending", "hold_job", "release_job", "update_job",
         "recent_failures"}  # fmt: skip
READ_ONLY = {"gpu_status", "select_gpus", "list_queue", "show_job", "job_logs", "wait_job",
             "why_pending", "recent_failures"}  # fmt: skip


def _server(env: dict[str, str], user: str | None = None) -> StdioServerParameters:
    argv = [sys.executable, "-m", "berth", "mcp"]
    if user is None:
        return StdioServerParameters(command=argv[0], args=argv[1:], env=env)
    # As another user: this interpreter may live under /root, which they cannot enter.
    argv = [*python_as(user, env), *argv[1:]]
    return StdioServerParameters(command=argv[0], args=argv[1:], env={}, cwd="/")


def _session(
    params: StdioServerParameters, calls: list[tuple[str, dict[str, Any]]], describe: bool = False
) -> Any:
    """The tools' names (``describe``: the tools as listed), then each call's (is_error,
    structured result, text result), in order, over one connection."""

    async def go() -> Any:
        async with Client(params, read_timeout_seconds=60) as client:
            tools = (await client.list_tools()).tools
            out: list[Any] = [{t.name for t in tools} if not describe else tools]
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
    assert '"starts": "never (held)"' in why[2]  # (the words `berth queue --start` says)
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
    env = {
        **system.env,
        "PATH": os.environ["PATH"],
        **{k: v for k, v in daemon.env.items() if k.startswith(("FAKE_NVML", "LD_"))},
    }
    _, cancel, mine = _session(_server(env, user=B), [
        ("cancel_job", {"job_id": str(theirs)}),
        ("submit_job", {"command": ["true"], "dry_run": True}),
    ])  # fmt: skip
    assert cancel[0] and f"job {theirs}" in cancel[2] and A in cancel[2], cancel
    assert not mine[0]
    assert daemon.call("queue", all=True)["jobs"][0]["state"] == "PENDING"


def _answer(result: tuple[bool, Any, str]) -> Any:
    assert not result[0], result[2]
    return json.loads(result[2])


def test_tools_describe_every_parameter_type_gpus_as_a_number_and_say_which_only_read(daemon):
    """Issue 40.4: an agent reads the schema: each parameter described, ``gpus`` a number,
    the tools that change nothing marked read-only (and only those)."""
    daemon.start()
    (tools,) = _session(_server(_env(daemon)), [], describe=True)
    by_name = {t.name: t for t in tools}
    assert set(by_name) == TOOLS
    for t in tools:
        for pname, prop in t.input_schema.get("properties", {}).items():
            assert prop.get("description"), f"{t.name}({pname}) has no description"
        hints = t.annotations
        assert hints is not None and hints.read_only_hint is (t.name in READ_ONLY), t.name
    gpus = by_name["submit_job"].input_schema["properties"]["gpus"]
    assert gpus["type"] == "number" and gpus["exclusiveMinimum"] == 0
    assert by_name["cancel_job"].annotations.destructive_hint is True


def test_list_queue_is_a_summary_with_filters_and_limit_and_array_ids(daemon):
    """Issue 40.4: list_queue answered 1.28 MB for 1,989 jobs; now a summary of all that
    match and the first ``limit`` rows (50 by default), filtered by state and user; an
    array's task is named 9_1, as the CLI names it."""
    daemon.start()
    running = daemon.submit(*daemon.workload("--seconds", "60"), gpus=4)
    held = [daemon.submit("true", hold=True, name=f"sweep-{k}") for k in range(150)]
    arr = daemon.berth("submit", "--array", "1-2", "--hold", "--parsable", "--", "true")
    assert arr.returncode == 0, arr.stderr
    array_id = arr.stdout.strip().split(";")[0]
    wait_until(lambda: daemon.call("queue")["jobs"][0]["state"] == "RUNNING", timeout=30)
    whole = daemon.berth("queue", "--json").stdout
    _, first, running_only, few, arrays, mine = _session(_server(_env(daemon)), [
        ("list_queue", {}),
        ("list_queue", {"state": "RUNNING"}),
        ("list_queue", {"state": "PD", "limit": 3}),
        ("list_queue", {"state": "PD", "limit": 0}),
        ("list_queue", {"user": "root", "limit": 1}),
    ])  # fmt: skip
    out = _answer(first)
    assert len(first[2]) * 5 < len(whole), (len(first[2]), len(whole))  # (was the whole)
    assert out["summary"]["total"] == 153 and out["summary"]["by_state"] == {
        "RUNNING": 1, "PENDING": 152}  # fmt: skip
    assert len(out["jobs"]) == 50 and out["more"] == 103
    assert out["jobs"][0]["id"] == str(running) and out["jobs"][1]["id"] == str(held[0])
    assert out["jobs"][1]["reason"] == "Held"
    only = _answer(running_only)
    assert [j["id"] for j in only["jobs"]] == [str(running)]
    assert only["summary"]["total"] == 1
    few_out = _answer(few)
    assert [j["id"] for j in few_out["jobs"]] == [str(h) for h in held[:3]]
    assert few_out["more"] == 149 and few_out["summary"]["by_state"] == {"PENDING": 152}
    ids = [j["id"] for j in _answer(arrays)["jobs"]]
    assert ids == [] and _answer(arrays)["more"] == 152  # (limit 0: only the summary)
    assert _answer(mine)["summary"]["by_user"] == {"root": 153}
    rows = daemon.call("queue")["jobs"]
    tasks = [f"{r['array_job']}_{r['array_task']}" for r in rows if r["array_job"] is not None]
    assert tasks == [f"{array_id}_1", f"{array_id}_2"]
    (_, tail) = _session(_server(_env(daemon)), [("list_queue", {"limit": 1000})])
    listed = [j["id"] for j in _answer(tail)["jobs"]]
    assert listed[-2:] == tasks  # (never the internal ids)


def test_why_pending_lists_the_jobs_ahead_and_what_it_waits_for(daemon):
    daemon.start()
    big = daemon.submit(*daemon.workload("--seconds", "60"), gpus=4)
    wait_until(lambda: daemon.job(big)["state"] == "RUNNING", timeout=30)
    a, b, c = (daemon.submit("true", gpus=2, name=f"w{k}") for k in range(3))
    _, why = _session(_server(_env(daemon)), [("why_pending", {"job_id": str(c)})])
    out = _answer(why)
    assert out["state"] == "PENDING" and out["ahead_count"] == 2
    assert [j["id"] for j in out["ahead"]] == [str(a), str(b)]
    assert out["ahead"][0]["name"] == "w0" and "prediction" in out
    assert out["waiting_for"] == [str(big)], out  # ("GPU 0 held by job 1")


def test_an_agent_holds_releases_and_updates_its_job_and_waits_zero(daemon):
    daemon.start()
    big = daemon.submit(*daemon.workload("--seconds", "60"), gpus=4)
    job = daemon.submit("true", gpus=1)
    _, held, waited, upd, bad, released = _session(_server(_env(daemon)), [
        ("hold_job", {"job_ids": [str(job)]}),
        ("wait_job", {"job_id": str(job), "timeout_seconds": 0}),
        ("update_job", {"job_id": str(job), "gpus": 2, "time": "30", "name": "renamed"}),
        ("update_job", {"job_id": str(job), "gpus": 9}),
        ("release_job", {"job_ids": [str(job)]}),
    ])  # fmt: skip
    assert _answer(held)["ok"] is True
    assert _answer(waited) == {"ended": False, "jobs": []}  # (at once: 0 is "only look")
    assert _answer(upd)["ok"] is True
    assert bad[0] and "9" in bad[2]  # the daemon's refusal, as an error
    assert _answer(released)["ok"] is True
    shown = daemon.job(job)
    assert shown["name"] == "renamed" and shown["request"]["gpus"] == 2
    assert shown["time_limit"] == 1800 and not shown.get("held")
    assert daemon.job(big)["state"] == "RUNNING"


def test_recent_failures_say_state_exit_and_the_logs_tail(daemon):
    """Issue 40.4: "what did my last failures say", in one call."""
    daemon.start()
    ok = daemon.submit("sh", "-c", "echo fine")
    bad = [daemon.submit("sh", "-c", f"echo line-{k}; echo boom-{k} >&2; exit {k + 2}")
           for k in range(3)]  # fmt: skip
    daemon.wait_done([ok, *bad])
    _, answer = _session(_server(_env(daemon)), [("recent_failures", {"count": 2, "lines": 5})])
    out = _answer(answer)
    assert out["total"] == 3
    got = [(f["id"], f["state"], f["exit_code"]) for f in out["failures"]]
    assert got == [(str(bad[2]), "FAILED", 4), (str(bad[1]), "FAILED", 3)]  # newest first
    assert "line-2" in out["failures"][0]["log_tail"] and "boom-2" in out["failures"][0]["log_tail"]
