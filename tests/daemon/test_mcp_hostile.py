"""docs/agents.md, "Authority": an agent can do exactly what its user can, "its own jobs,
not others'", and a job's command is a list of words, never run through a shell. User B's
agent (the MCP server run as B, driven by the SDK's client over stdio) tries every tool that
acts on user A's job, and every tool that reads, on the system daemon: each act is refused
with the daemon's words and A's job is as A left it; no answer carries the value of a
variable A's job exports. And no parameter of a tool becomes an option of the command it
runs, nor a shell's input.

Needs root (to act as the users), as CI runs the suite.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from test_mcp import _env, _server, _session
from test_system_mode import System
from userkit import A, B, berth_as

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")

SECRET = "zq-agent-secret-41"


def test_another_users_agent_cannot_act_on_a_job_nor_read_its_secrets(daemon: Any) -> None:
    system = System(daemon)
    system.start()
    made = berth_as(A, "submit", "--parsable", "--hold", "-J", "as-a-left-it", "--", "sh", "-c",
                    "echo $A_TOKEN", env={**system.env, "A_TOKEN": SECRET})  # fmt: skip
    assert made.returncode == 0, made.stderr
    theirs = str(int(made.stdout.split()[0]))
    failed = berth_as(A, "submit", "--parsable", "--", "sh", "-c", "echo $A_TOKEN; exit 3",
                      env={**system.env, "A_TOKEN": SECRET})  # fmt: skip
    assert failed.returncode == 0, failed.stderr
    failed_id = int(failed.stdout.split()[0])
    assert daemon.wait_done([failed_id])[failed_id]["state"] == "FAILED"
    env = {**system.env, "PATH": os.environ["PATH"],
           **{k: v for k, v in daemon.env.items() if k.startswith(("FAKE_NVML", "LD_"))}}  # fmt: skip
    acts = [
        ("release_job", {"job_ids": [theirs]}),
        ("hold_job", {"job_ids": [theirs]}),
        ("update_job", {"job_id": theirs, "name": "renamed-by-b", "priority": 0}),
        ("update_job", {"job_id": theirs, "gpus": 2, "time": "5"}),
        ("cancel_job", {"job_id": theirs, "signal": "USR1"}),
        ("cancel_job", {"job_id": theirs}),
    ]
    reads = [
        ("show_job", {"job_id": theirs}),
        ("list_queue", {"user": A}),
        ("why_pending", {"job_id": theirs}),
        ("job_logs", {"job_id": theirs}),
        ("wait_job", {"job_id": theirs, "timeout_seconds": 0}),
        ("recent_failures", {}),
    ]
    _, *answers = _session(_server(env, user=B), [*acts, *reads])
    for (name, args), (is_error, _, text) in zip(acts, answers[: len(acts)], strict=True):
        assert is_error, f"{name}({args}) as {B} on {A}'s job was not refused: {text}"
        assert f"job {theirs}" in text and A in text, (name, text)  # (the daemon's words)
    for (name, _), (_, _, text) in zip(reads, answers[len(acts) :], strict=True):
        assert SECRET not in text, f"{name} showed {A}'s job's variable to {B}'s agent"
    failures = json.loads(answers[-1][2])  # ("your last failed jobs": B has none)
    assert failures["user"] == B and failures["failures"] == [] and failures["total"] == 0
    job = daemon.job(int(theirs))
    assert job["state"] == "PENDING" and job["reason"].startswith("Held"), job  # as A left it
    assert job["name"] == "as-a-left-it" and job["request"]["gpus"] == 1, job
    assert job.get("time_limit") is None, job


def test_no_tool_parameter_becomes_an_option_or_a_shells_input(daemon: Any) -> None:
    """Each value is one word after its flag: one that looks like an option is refused by
    the command, never taken as one (``name="--wrap=..."`` would run a shell; ``user="-u"``
    ...); a command's words reach the job as they are (``$HOME`` is not expanded, ``;``
    ends nothing), and one word with spaces is no program (refused, nothing queued)."""
    daemon.start()
    marker = os.path.join(daemon.sockdir, "shell-ran")
    shell = f"touch {marker}"
    calls = [
        ("submit_job", {"command": ["true"], "name": f"--wrap={shell}"}),
        ("submit_job", {"command": ["true"], "mem": f"--wrap={shell}"}),
        ("submit_job", {"command": ["true"], "time": "--hold"}),
        ("submit_job", {"command": ["true"], "dependency": "--hold"}),
        ("submit_job", {"command": ["true"], "directory": f"--wrap={shell}"}),
        ("submit_job", {"command": [shell]}),  # (one word: no program, never a shell)
        ("submit_job", {"command": ["--wrap", shell]}),  # (after --: the command's words)
        ("submit_job", {"command": ["echo", "$HOME;", "touch", marker, "`id`"]}),
        ("list_queue", {"user": "--all"}),
        ("select_gpus", {"name": "--json"}),
        ("cancel_job", {"job_id": "1 --all"}),
        ("cancel_job", {"job_id": "1", "signal": "--all"}),
    ]
    _, *answers = _session(_server(_env(daemon)), calls)
    for (name, args), (is_error, _, text) in zip(calls[:6], answers[:6], strict=True):
        assert is_error, f"{name}({args}) was not refused: {text}"
    wrapped, echoed = answers[6], answers[7]
    for (name, args), (is_error, _, text) in zip(calls[8:], answers[8:], strict=True):
        assert is_error, f"{name}({args}) was not refused: {text}"
    daemon_jobs = daemon.call("queue", all=True)["jobs"]
    argvs = {j["id"]: daemon.job(j["id"])["command"] for j in daemon_jobs}
    # Only the two whose words are a command were queued, each as its words, no shell's.
    assert sorted(argvs.values()) == sorted([["--wrap", shell],
                                             ["echo", "$HOME;", "touch", marker, "`id`"]]), argvs  # fmt: skip
    assert not wrapped[0] and not echoed[0]
    echo_id = json.loads(echoed[2])["job_id"]
    daemon.wait_done(list(argvs))
    out_path = daemon.job(echo_id)["stdout"]
    with open(out_path) as f:
        assert f.read().strip() == f"$HOME; touch {marker} `id`"
    assert not os.path.exists(marker), "a shell ran a tool's parameter"


def test_a_command_that_does_not_answer_is_an_error_in_time(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/agents.md, "Errors": each command has a time limit (``mcpserver.TIMEOUT``; here
    made short): a daemon that accepts and never answers costs the agent that long, then the
    tool's error says so."""
    import socket
    import time

    pytest.importorskip("mcp")
    from mcp.server.mcpserver.exceptions import ToolError

    from berth import mcpserver

    path = str(tmp_path / "silent.sock")
    with socket.socket(socket.AF_UNIX) as silent:
        silent.bind(path)
        silent.listen(8)  # (accepts in the kernel, never reads nor answers)
        monkeypatch.setenv("BERTH_SOCKET", path)
        monkeypatch.setattr(mcpserver, "TIMEOUT", 2.0)
        began = time.monotonic()
        with pytest.raises(ToolError, match=r"did not answer in 2 s"):
            mcpserver.list_queue()
        took = time.monotonic() - began
    assert 2.0 <= took < 20, took  # (the client's own 30 s never reached)
