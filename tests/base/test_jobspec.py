"""The job spec (berth/wire/jobspec.py) on its own: the one validator of a job, its JSON shape
(the wire's and the store's), and the one rule of a GPU count (berth/units.py)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from berth.core.job import Request
from berth.errors import UsageError
from berth.units import GPU_COUNT_RULE, gpu_count
from berth.wire.jobspec import DAEMON_FIELDS, FIELDS, JobSpec, one_machine
from berth.wire.protocol import BAD_REQUEST, ProtocolError

BASE = {"env": {"PATH": "/usr/bin:/bin"}, "cwd": "/w"}

# Between them, every field at a value other than its default (the rules between fields do
# not let one job have all: argv or wrap, unique or once or an array).
EVERY: list[tuple[dict[str, Any], bool]] = [
    (
        {
            **BASE,
            "argv": ["python", "train.py", "", "--lr"],
            "name": "",
            "gpus": 2,
            "nodes": 2,
            "ntasks_per_node": 4,
            "mem": 8 << 30,
            "gpu_ids": [3, 1, 2],
            "prefer": [2],
            "name_filter": "A100",
            "time_limit": 90.5,
            "priority": -5,
            "stdout": "o-%j.log",
            "stderr": "/l/e-%A_%a",
            "env_setup": "source venv/bin/activate",
            "conda": "my env",
            "dependency": "afterok:4:7?afterany:9_2",
            "retries": 3,
            "requeue": True,
            "max_requeues": 2,
            "begin": 1_800_000_000.5,
            "hold": True,
            "pty": True,
            "keep_idle": True,
            "umask": 0o022,
            "array": "0-2%2",
            "array_argvs": [["a"], ["b", "1"], ["c"]],
            "inject_arg": "--cuda",
            "notify": 'notify-send "$BERTH_JOB_STATE"',
            "mail_user": "me@example.org",
            "mail_type": "BEGIN,FAIL",
            "request_source": "llm_config.json: --llm qwen2.5-3b-inst",
            "project": "vision-2.lab_x",
        },
        False,
    ),
    ({**BASE, "wrap": "echo {gpus} && sleep 1", "gpus": 0.5, "unique": True}, False),
    ({**BASE, "argv": ["true"], "once": "line-7", "time_limit": 60}, False),
    ({**BASE, "argv": ["true"], "mem": 8 << 30, "by_memory": True}, False),
    ({**BASE, "argv": ["true"], "learn_mem": True, "retry_oom": True}, False),
    (
        {
            **BASE,
            "argv": ["a"],
            "stdout_path": "/w/3_1.out",
            "stderr_path": "/w/3_1.err",
            "pty_dir": "/var/lib/berth/logs/al",
            "unique_key": "c9af6fc4ee3d810f3597a6a4d5dd81a9",
            "array_task": [3, 1, 3, 0, 2],
        },
        True,
    ),
]


@pytest.mark.parametrize(("raw", "stored"), EVERY)
def test_from_dict_of_to_dict_is_the_same_job(raw: dict[str, Any], stored: bool) -> None:
    spec = JobSpec.from_dict(raw, stored=stored)
    wire = spec.to_dict()
    assert json.loads(json.dumps(wire)) == wire  # plain JSON
    again = JobSpec.from_dict(wire, stored=stored)
    assert again == spec and again.to_dict() == wire
    assert spec.replace() == spec and spec.replace(priority=9) != spec


def test_the_examples_give_every_field_a_value_of_its_own() -> None:
    seen = set()
    for raw, stored in EVERY:
        seen |= set(JobSpec.from_dict(raw, stored=stored).to_dict())
    assert seen == set(FIELDS) | set(DAEMON_FIELDS)
    fields = {k for k, v in vars(JobSpec).items() if isinstance(v, property)} - {"command"}
    assert fields == seen  # (each read by name)
    assert set(JobSpec.__annotations__) == seen  # (each field typed, and no other)


def test_values_come_out_typed_and_normalised() -> None:
    spec = JobSpec.from_dict(EVERY[0][0])
    assert spec.argv == ("python", "train.py", "", "--lr") and spec.gpu_ids == (3, 1, 2)
    assert spec.array_argvs == (("a",), ("b", "1"), ("c",)) and spec.dependency == "afterok:4:7?afterany:9_2"
    assert spec.command == "python train.py  --lr"
    assert JobSpec.from_dict({**BASE, "argv": ["x"], "gpus": 2.0}).gpus == 2
    assert type(JobSpec.from_dict({**BASE, "argv": ["x"], "gpus": 2.0}).gpus) is int
    plain = JobSpec.from_dict({**BASE, "argv": ["x"], "prefer": None, "wrap": None})
    assert (plain.gpus, plain.prefer, plain.umask, plain.hold) == (1, (), None, False)
    assert plain.to_dict() == {**BASE, "argv": ["x"]}  # defaults are left out
    assert JobSpec.from_dict({**BASE, "array": " 0-9:3,1 %2", "argv": ["x"]}).array == "0-9:3,1%2"


def test_it_is_frozen() -> None:
    spec = JobSpec.from_dict({**BASE, "argv": ["x"]})
    with pytest.raises(AttributeError, match="frozen"):
        spec.gpus = 4  # type: ignore[misc]
    with pytest.raises(TypeError, match="no field"):
        spec.replace(gpu=4)


def _refusal(raw: Any, stored: bool = False) -> str:
    with pytest.raises(ProtocolError) as e:
        JobSpec.from_dict(raw, stored=stored)
    assert e.value.code == BAD_REQUEST
    return e.value.message


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("after_ok", [True], "job field 'after_ok' = [True]: must be a list of integers from 1"),
        ("dependency", "afterok:x", "job field 'dependency' = 'afterok:x': invalid job 'x'"),
        ("dependency", "afterok:1,afterany:2?after:3", "job field 'dependency' = 'afterok:1,afterany:2?after:3': invalid dependency"),
        ("dependency", ["afterok:1"], "job field 'dependency' = ['afterok:1']: must be"),
        ("priority", 1.0, "job field 'priority' = 1.0: must be an integer from -2147483647"),
        (
            "time_limit",
            10 * 365 * 86400,
            "job field 'time_limit' = 315360000: must be a finite "
            "number above 0 and at most 3.16224e+07",
        ),
        ("argv", ["true", 5], "job field 'argv[1]' = 5: must be a string"),
        ("env", {"A=B": "x"}, "job field 'env' = 'A=B': a variable name must be"),
        ("cwd", "rel", "job field 'cwd' = 'rel': must be an absolute path"),
        ("stdout", "a/../b", "job field 'stdout' = 'a/../b': must not have a '..' component"),
        ("gpu_ids", [0, 0], "job field 'gpu_ids' = [0, 0]: names a GPU twice"),
        ("gpus", 1.5, f"job field 'gpus' = 1.5: {GPU_COUNT_RULE}"),
        ("gpus", 2000, "job field 'gpus' = 2000: must be at most 1024"),
        ("project", "a b", "job field 'project' = 'a b': must be a project name: 1 to 64"),
        ("project", "-x", "job field 'project' = '-x': must be a project name"),
        ("project", "x" * 65, f"job field 'project' = '{'x' * 65}': is longer than 64"),
        ("array", "0-20000", "job field 'array' = '0-20000': has 20001 tasks; at most 10000"),
        ("mail_user", "a b", "job field 'mail_user' = 'a b': must be one mail address"),
        ("mail_type", "END,SOMETIMES", "job field 'mail_type' = 'END,SOMETIMES': give BEGIN, END"),
        ("mail_type", "NONE,END", "job field 'mail_type' = 'NONE,END': give BEGIN, END"),
        ("nodes", 0, "job field 'nodes' = 0: must be an integer from 1 to 65536"),
        ("ntasks_per_node", True, "job field 'ntasks_per_node' = True: must be an integer"),
    ],
)
def test_a_bad_field_is_named_with_its_value_and_nothing_changes(
    field: str, value: Any, message: str
) -> None:
    got = _refusal({**BASE, "argv": ["true"], field: value})
    assert got.startswith(message) and got.endswith("; nothing was changed")


def test_the_rules_between_fields() -> None:
    for raw in ({**BASE}, {**BASE, "argv": ["x"], "wrap": "x"}):
        assert "give a command (argv) or a shell string (wrap)" in _refusal(raw)
    wrap = {**BASE, "wrap": "x", "inject_arg": "--cuda"}
    assert "job field 'inject_arg' = '--cuda': needs a command (argv)" in _refusal(wrap)
    sweep = {**BASE, "argv": ["a"], "array": "0-2", "array_argvs": [["a"], ["b"]]}
    assert "needs an argv and an array of as many tasks (it has 3)" in _refusal(sweep)
    both = {**BASE, "argv": ["a"], "unique": True, "once": "k"}  # (berth watch --unique)
    assert JobSpec.from_dict(both).once == "k"
    assert _refusal({**BASE, "argv": ["a"], "array": "0-2", "unique": True}) == (
        "--unique is for one job, not an --array"
    )
    many = {**BASE, "argv": ["a"], "gpus": 3, "gpu_ids": [0, 1]}
    assert "asks for more GPUs than gpu_ids allows ([0, 1])" in _refusal(many)
    by_mem = {**BASE, "argv": ["a"], "mem": 8 << 30, "by_memory": True}
    assert JobSpec.from_dict({**by_mem, "gpus": 2, "gpu_ids": [0, 1]}).by_memory  # each of 2
    for bad in ({**by_mem, "gpus": 0.5}, {**by_mem, "mem": None}):
        assert "'by_memory' = True: goes with 'mem' and a whole number of GPUs" in _refusal(bad)
    assert _refusal({"argv": ["a"], "env": {}}) == "job: missing field 'cwd'"
    assert "must be an object" in _refusal([BASE])


def test_several_nodes_or_tasks_are_valid_jobs_that_only_slurm_runs() -> None:
    spec = JobSpec.from_dict({**BASE, "argv": ["a"], "nodes": 2, "ntasks_per_node": 4})
    assert (spec.nodes, spec.ntasks_per_node) == (2, 4)
    assert JobSpec.from_dict({**BASE, "argv": ["a"]}).nodes == 1
    assert one_machine(1, None) is None and one_machine(1, 1) is None
    assert one_machine(2, None) == ("-N 2: the local queue runs on one machine; use "
                                    "--backend slurm to run a job across nodes")  # fmt: skip
    assert "--ntasks-per-node 4: the local queue runs the command once" in str(one_machine(1, 4))


def test_a_client_may_not_send_what_only_the_daemon_sets() -> None:
    for field, value in (("stdout_path", "/etc/shadow"), ("unique_key", "x"), ("uid", 0)):
        message = _refusal({**BASE, "argv": ["a"], field: value})
        assert message.startswith(f"job: unknown field {field!r} (known: argv, wrap, env,")
        assert "stdout_path" not in message.partition("(known:")[2]
    assert JobSpec.from_dict({**BASE, "argv": ["a"], "stdout_path": "/w/o"}, stored=True)
    assert "must be an absolute path" in _refusal(
        {**BASE, "argv": ["a"], "stdout_path": "o"}, stored=True
    )


@pytest.mark.parametrize("value", [1.5, 0, -1, True, "2", float("nan"), float("inf"), None])
def test_one_rule_and_one_message_for_a_gpu_count(value: Any) -> None:
    rule = re.escape(GPU_COUNT_RULE)
    with pytest.raises(UsageError, match=f"^gpus = {re.escape(repr(value))}: {rule}$"):
        gpu_count(value, "gpus")
    if value == 0:  # (a job and the core's request take 0: CPU only, -g 0; issue 34.3)
        assert JobSpec.from_dict({**BASE, "argv": ["x"], "gpus": value}).gpus == 0
        assert Request(gpus=value).gpus == 0
    else:
        with pytest.raises(ProtocolError, match=rule):
            JobSpec.from_dict({**BASE, "argv": ["x"], "gpus": value})
        with pytest.raises(UsageError, match=rule):
            Request(gpus=value)


def test_a_gpu_count_comes_out_as_the_count() -> None:
    assert [gpu_count(v) for v in (1, 2.0, 0.5, 1024)] == [1, 2, 0.5, 1024]
    assert type(gpu_count(2.0)) is int and gpu_count(0, none=True) == 0


def test_an_earlier_berths_after_ok_is_afterok() -> None:
    """Clients and stored rows of earlier berths sent ``after_ok: [ids]``: it reads as the
    dependency ``afterok:ID:ID`` (schema 7 rewrites stored rows the same way)."""
    spec = JobSpec.from_dict({**BASE, "argv": ["x"], "after_ok": [4, 7]})
    assert spec.dependency == "afterok:4:7" and "after_ok" not in spec.to_dict()
    assert JobSpec.from_dict({**BASE, "argv": ["x"], "after_ok": []}).dependency is None
    both = {**BASE, "argv": ["x"], "after_ok": [4], "dependency": "afterok:4"}
    assert "old form of 'dependency'" in _refusal(both)
