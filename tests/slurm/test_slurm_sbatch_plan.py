"""The job spec -> sbatch mapping (berth/backends/sbatch.py), without a cluster: what maps to
what, and what is refused with which reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from slurmkit import local_argv

from berth.backends.base import ArraySpec, SubmitRefused, Unsupported
from berth.backends.sbatch import Cluster, plan
from berth.errors import UsageError
from berth.wire.jobspec import JobSpec

SHARDED = Cluster({"n1": ({"": 4}, 8), "n2": ({"a100": 2, "h100": 2}, 16)})
PLAIN = Cluster({"n1": ({"": 4}, 0)})


def job(**fields: Any) -> JobSpec:
    """A job as `berth submit` builds it (a field given as None is left out); a sweep's
    ``array_argvs`` unchecked, so that plan's own check of a sweep is what is tested."""
    argvs = fields.pop("array_argvs", None)
    raw = {"argv": ["python", "train.py", "--lr", "0.1"], "env": {"A": "1"}, "cwd": "/w",
           **fields}  # fmt: skip
    spec = JobSpec.from_dict({k: v for k, v in raw.items() if v is not None})
    return spec if argvs is None else spec.replace(array_argvs=tuple(map(tuple, argvs)))


def argv(spec: JobSpec, cluster: Cluster = SHARDED, **kw: Any) -> list[str]:
    return plan(spec, cluster, log_dir="/logs", **kw).argv


def test_whole_gpus_name_time_logs_dir() -> None:
    a = argv(job(gpus=2, time_limit=90061.5, name="big"))
    assert a[:3] == ["sbatch", "--parsable", "--gres=gpu:2"]
    assert a[a.index("-t") + 1] == "1-01:02:00"  # rounded up to the minute (as Slurm)
    p = plan(job(gpus=2, time_limit=90061.5, name="big"), SHARDED, log_dir="/logs")
    assert p.notes == ["time limit 90061.5 s is 1502 minutes on Slurm (its limits are whole "
                       "minutes)"]  # fmt: skip
    assert a[a.index("-J") + 1] == "big"
    assert a[a.index("-o") + 1] == a[a.index("-e") + 1] == "/logs/%j.out"
    assert a[a.index("-D") + 1] == "/w"
    assert a[-1] == "--export=ALL"


def test_defaults_name_from_the_command_and_arrays_log_per_task() -> None:
    a = argv(job(), array=ArraySpec.parse("0-9%2"))
    assert a[a.index("-J") + 1] == "python"
    assert "--array=0-9%2" in a
    assert a[a.index("-o") + 1] == "/logs/%A_%a.out"


def test_fractions_become_shards_rounded_up() -> None:
    # n2 has 16 shards on 4 GPUs: 4 per GPU, the most of any node.
    assert argv(job(gpus=0.5))[2] == "--gres=shard:2"
    assert argv(job(gpus=0.3))[2] == "--gres=shard:2"
    assert argv(job(gpus=0.25))[2] == "--gres=shard:1"


def test_a_fraction_without_shards_is_refused_saying_so() -> None:
    with pytest.raises(Unsupported, match=r"-g 0.5: not on Slurm: this cluster defines no shards"):
        argv(job(gpus=0.5), PLAIN)


def test_gpu_name_picks_a_typed_gres_or_is_refused() -> None:
    assert argv(job(gpus=1, name_filter="A100"))[2] == "--gres=gpu:a100:1"
    with pytest.raises(
        Unsupported, match=r"matches none of the cluster's GPU types \(a100, h100\)"
    ):
        argv(job(name_filter="V100"))
    with pytest.raises(Unsupported, match="matches several"):
        argv(job(name_filter="100"))


@pytest.mark.parametrize(
    ("field", "value", "flag"),
    [
        ("mem", 12 << 30, "--mem: not on Slurm: Slurm does not schedule by GPU memory"),
        ("gpu_ids", [0], "--gpu-ids"),
        ("prefer", [1], "--prefer"),
        ("retries", 2, "--retries"),
        ("pty", True, "--pty"),
        ("unique", True, "--unique"),
        ("notify", "true", "--notify: not on Slurm"),
        ("retry_oom", True, "--retry-oom: not on Slurm"),
    ],
)
def test_what_slurm_cannot_do_is_refused(field: str, value: object, flag: str) -> None:
    with pytest.raises(Unsupported, match=flag):
        argv(job(**{field: value}))


def test_a_job_without_g_or_mem_gets_whole_gpus_on_slurm_not_a_learned_share() -> None:
    """`berth submit` without -g and --mem asks the local daemon to size a share from earlier
    runs (learn_mem); Slurm has no such history: the job is the one whole GPU it asked."""
    assert argv(job(learn_mem=True)) == argv(job())


def test_dependencies_requeue_hold_priority_partition_memory() -> None:
    a = argv(
        job(after_ok=[4, 7], requeue=True, hold=True, priority=5),
        partition="gpu",
        mem_per_gpu=16 << 30,
    )
    for flag in ("--dependency=afterok:4:7", "--requeue", "--hold", "--nice=-5",
                 "--mem-per-gpu=16384M"):  # fmt: skip
        assert flag in a
    assert a[a.index("-p") + 1] == "gpu"
    assert "--mem=512M" in argv(job(gpus=0.5), mem_per_gpu=512 << 20)  # shards: the job's RAM


def test_every_dependency_form_goes_to_sbatch_as_written() -> None:
    for text in ("afterok:4:7?afterany:9_2", "singleton", "after:4+10,afternotok:5"):
        a = argv(job(dependency=text))
        assert f"--dependency={text}" in a and "--kill-on-invalid-dep=yes" in a
    assert not any(w.startswith("--dependency") for w in argv(job()))


def test_the_command_is_the_scripts_arguments_never_shell_text() -> None:
    hostile = ["python", "-c", "$(rm -rf ~)", "'; echo pwned #", "a\nb"]
    p = plan(job(argv=hostile, env_setup="source venv/bin/activate"), SHARDED, log_dir="/l")
    assert p.args == hostile
    for word in hostile[2:]:
        assert word not in p.script
    assert "source venv/bin/activate" in p.script  # the user's own setup, as they asked
    assert p.script.rstrip().endswith('exec "$@"')
    assert plan(job(), SHARDED, log_dir="/l").script.rstrip().endswith('exec "$@"')


def test_wrap_is_run_by_sh_and_conda_through_the_environment() -> None:
    p = plan(job(argv=None, wrap="a && b", conda="my env"), SHARDED, log_dir="/l")
    assert p.args == ["/bin/sh", "-c", "a && b"]
    assert p.env["BERTH_CONDA_ENV"] == "my env"
    assert "my env" not in p.script and 'conda activate "$BERTH_CONDA_ENV"' in p.script


def test_sbatch_keeps_what_it_needs_when_the_job_exports_nothing() -> None:
    p = plan(job(env={"HOME": "/h"}), SHARDED, log_dir="/l", environ={"SLURM_CONF": "/c"})
    assert p.env == {"HOME": "/h", "SLURM_CONF": "/c"}
    p = plan(job(env={"SLURM_CONF": "/mine"}), SHARDED, log_dir="/l", environ={"SLURM_CONF": "/c"})
    assert p.env["SLURM_CONF"] == "/mine"


@pytest.mark.parametrize(
    ("text", "indices", "throttle", "normal"),
    [
        ("0-9%2", list(range(10)), 2, "0-9%2"),
        ("1,3,5-7", [1, 3, 5, 6, 7], None, "1,3,5-7"),
        ("0-15:4", [0, 4, 8, 12], None, "0-15:4"),
        (" 4 ", [4], None, "4"),
    ],
)
def test_array_specs(text: str, indices: list[int], throttle: int | None, normal: str) -> None:
    a = ArraySpec.parse(text)
    assert (list(a.indices), a.throttle, a.text) == (indices, throttle, normal)


@pytest.mark.parametrize("text", ["", "a-b", "5-2", "0-9%0", "0-9%x", "3:2", "1,,2", "-1"])
def test_bad_array_specs_name_the_value(text: str) -> None:
    with pytest.raises(UsageError, match="invalid --array"):
        ArraySpec.parse(text)


def test_mail_user_is_slurms_own() -> None:
    a = argv(job(mail_user="me@example.org"))
    assert "--mail-user=me@example.org" in a and "--mail-type=END,FAIL" in a
    a = argv(job(mail_user="me@example.org", mail_type="BEGIN,REQUEUE"))  # (--mail-type)
    assert "--mail-type=BEGIN,REQUEUE" in a and "--mail-type=END,FAIL" not in a


def test_a_project_is_slurms_account_and_not_a_pass_through() -> None:
    assert "--account=vision" in argv(job(project="vision"))
    with pytest.raises(UsageError, match="berth sets --account itself; use berth's --project"):
        argv(job(), extra=["-A vision"])


# -- the batch script, run by bash here as slurmd runs it (the real Slurm: test_slurm_inject.py)

PRINT = [sys.executable, "-c", "import sys, json; print(json.dumps(sys.argv[1:]))"]


def _run_script(p: Any, tmp_path: Any, **env: str) -> subprocess.CompletedProcess[str]:
    assert "\r" not in p.script  # (sbatch refuses a script with CR LF)
    path = tmp_path / "batch.sh"
    path.write_bytes(p.script.encode("utf-8", "surrogateescape"))
    return subprocess.run(
        ["bash", str(path), *p.args], env={"PATH": os.environ["PATH"], **env},
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("words", "inject_arg", "gpus"),
    [
        (["--cuda", "7", "x"], "--cuda", [2, 3]),
        (["--cuda=7", "y"], "--cuda=machine", [1, 3]),
        (["a", "--cuda"], "--cuda", [0]),  # the flag last: it gets a value
        (["--cuda", "1", "--cuda=2", "--cuda", "3"], "--cuda=machine", [3]),  # every one
        (["--devices", "4", "--device-x=1"], "--device", [1, 2]),  # not the flag: appended
        ([], "--gpu", [2]),
        (["--a'b$`c", "0"], "--a'b$`c=machine", [0, 2]),  # a flag with quotes and $
        (["cuda:{cuda}", "on={gpus}", "{gpus}{cuda}{gpus}{x}", "{ gpus}"], None, [1, 2]),
        (["--cuda", "{gpus}", "{cuda}"], "--cuda", [3, 0]),  # in the job's CUDA order
    ],
)
def test_gpu_ids_in_the_command_are_the_local_queues(
    words: list[str], inject_arg: str | None, gpus: list[int], tmp_path: Any
) -> None:
    spec = job(argv=[*PRINT, *words], **({"inject_arg": inject_arg} if inject_arg else {}))
    p = plan(spec, SHARDED, log_dir="/l")
    assert p.args == list(spec.argv or ())  # still the script's arguments, never its text
    cvd = ",".join(map(str, gpus))
    for setup in (None, "export X=1"):
        if setup:
            p = plan(spec.replace(env_setup=setup), SHARDED, log_dir="/l")
        done = _run_script(p, tmp_path, CUDA_VISIBLE_DEVICES=cvd)
        assert done.returncode == 0, done.stderr
        assert (
            json.loads(done.stdout) == local_argv([*PRINT, *words], inject_arg, gpus)[len(PRINT) :]
        )
    # no CUDA_VISIBLE_DEVICES (slurmd did not set it): Slurm's own list of the job's GPUs
    done = _run_script(p, tmp_path, SLURM_JOB_GPUS=cvd)
    assert json.loads(done.stdout) == local_argv([*PRINT, *words], inject_arg, gpus)[len(PRINT) :]


def test_placeholders_in_a_wrap_string_as_on_the_local_queue(tmp_path: Any) -> None:
    p = plan(job(argv=None, wrap="echo {gpus} {cuda} $CUDA_VISIBLE_DEVICES"), SHARDED, log_dir="/l")
    assert p.args == ["/bin/sh", "-c", "echo {gpus} {cuda} $CUDA_VISIBLE_DEVICES"]
    done = _run_script(p, tmp_path, CUDA_VISIBLE_DEVICES="1,3")
    assert done.stdout == "1,3 0,1 1,3\n"


def test_a_job_without_gpu_ids_or_with_uuids_fails_saying_why(tmp_path: Any) -> None:
    spec = job(argv=[*PRINT, "{cuda}"], inject_arg="--cuda=machine")
    done = _run_script(plan(spec, SHARDED, log_dir="/l"), tmp_path)
    assert done.returncode == 127 and done.stdout == ""
    assert done.stderr == (
        "berth: Slurm gave this job no GPU ids (CUDA_VISIBLE_DEVICES and SLURM_JOB_GPUS are "
        "unset) to put in its command; the command was not run\n"
    )
    uuids = "GPU-8a6e1f2c-0000-0000-0000-000000000001"
    done = _run_script(plan(spec, SHARDED, log_dir="/l"), tmp_path, CUDA_VISIBLE_DEVICES=uuids)
    assert done.returncode == 127 and done.stdout == ""
    assert done.stderr.startswith(f"berth: Slurm named this job's GPUs {uuids}, not by index")
    # the job's own numbering needs no index: 0..n-1 whatever the names
    spec = job(argv=[*PRINT, "{cuda}"], inject_arg="--cuda")
    done = _run_script(plan(spec, SHARDED, log_dir="/l"), tmp_path, CUDA_VISIBLE_DEVICES=uuids)
    assert json.loads(done.stdout) == ["0", "--cuda", "0"]


AWKWARD = ["a b", "it's", "$HOME", "`id`", "x\ny", "c\r\nd", "\t", '"q"', "back\\slash", "*",
           "-n", "é", "", "$(touch /tmp/pwned)", "\x7f\x01", "not utf-8: \udcff"]  # fmt: skip


def test_a_sweeps_script_gives_each_task_its_words_quoted(tmp_path: Any) -> None:
    argvs = [[*PRINT, v, "--i", str(i)] for i, v in enumerate(AWKWARD)]
    array = ArraySpec.parse(f"0-{len(argvs) - 1}%3")
    p = plan(job(argv=argvs[0], array_argvs=argvs), SHARDED, log_dir="/l", array=array)
    assert p.args == [] and "--array=0-15%3" in p.argv
    assert p.argv[p.argv.index("-o") + 1] == "/l/%A_%a.out"
    for i, argv in enumerate(argvs):
        done = _run_script(p, tmp_path, SLURM_ARRAY_JOB_ID="7", SLURM_ARRAY_TASK_ID=str(i))
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == argv[len(PRINT) :]
    done = _run_script(p, tmp_path, SLURM_ARRAY_JOB_ID="7", SLURM_ARRAY_TASK_ID="16")
    assert (done.returncode, done.stdout) == (127, "")
    assert "task 16 is none of this sweep's 16 (0-15)" in done.stderr


def test_a_sweep_is_one_array_of_its_commands() -> None:
    argvs = [["a", "1"], ["a", "2"]]
    for bad in (None, ArraySpec.parse("0-2"), ArraySpec.parse("1-2")):
        with pytest.raises(UsageError, match="a sweep of 2 commands runs as the array 0-1"):
            plan(job(array_argvs=argvs), SHARDED, log_dir="/l", array=bad)


def test_a_plain_job_runs_its_arguments_untouched() -> None:
    script = plan(job(argv=["python", "{x}", "--cuda", "1"]), SHARDED, log_dir="/l").script
    assert "_berth" not in script and script.endswith('exec "$@"\n')


def test_begin_is_sbatchs_begin_in_local_time() -> None:
    """Issue 24.2: a job's --begin reaches sbatch as its own --begin (local time)."""
    import time

    when = time.mktime((2026, 12, 1, 9, 0, 0, 0, 0, -1))
    p = plan(job(begin=when), SHARDED, log_dir="/logs")
    assert "--begin=2026-12-01T09:00:00" in p.argv


def test_nodes_and_tasks_per_node_run_the_command_under_srun() -> None:
    spec = job(gpus=2, nodes=2, ntasks_per_node=4, inject_arg="--cuda")
    p = plan(spec, SHARDED, log_dir="/logs")
    assert p.argv[2:6] == ["--gres=gpu:2", "-N", "2", "--ntasks-per-node=4"]  # gres per node
    before, _, rest = p.script.partition("<<'_BERTH_TASK_END'\n")
    task, _, after = rest.partition("_BERTH_TASK_END\n")
    assert after.startswith('set -- srun --kill-on-bad-exit=1 /bin/bash -c "$_berth_task"')
    assert "_berth_flag=--cuda" in task and "_berth_flag" not in before + after  # per task
    one = plan(job(gpus=2, inject_arg="--cuda"), SHARDED, log_dir="/logs")
    assert "srun" not in one.script and "-N" not in one.argv  # one node, one task: as before
    assert "srun" in plan(job(ntasks_per_node=2), SHARDED, log_dir="/logs").script
    own = plan(job(nodes=2, argv=["/usr/bin/srun", "python", "t.py"]), SHARDED, log_dir="/l")
    assert "srun --kill-on-bad-exit" not in own.script  # the user's own srun fans out
    with pytest.raises(UsageError, match=r"with a command that is srun: .* leave srun out"):
        plan(job(nodes=2, argv=["srun", "python", "--gpu", "{gpus}"]), SHARDED, log_dir="/l")


def test_nodes_are_berths_own_options_and_the_cluster_must_have_them() -> None:
    for word in ("-N2", "--nodes=2", "--ntasks-per-node=2"):
        with pytest.raises(UsageError, match=r"berth sets --n.* itself; use berth's"):
            argv(job(), extra=[word])
    with pytest.raises(SubmitRefused, match=r"-N 2 -g 3: only 1 node of the cluster has 3 GPUs"):
        argv(job(gpus=3, nodes=2), Cluster({"n1": ({"": 4}, 0), "n2": ({"": 2}, 0)}))


def test_a_sweep_or_a_requeue_across_nodes_picks_the_command_then_runs_srun() -> None:
    spec = job(nodes=2, array="0-1", array_argvs=[["a", "{cuda}"], ["b"]], requeue=True)
    text = plan(spec, SHARDED, log_dir="/l", array=ArraySpec.parse("0-1")).script
    case, srun, requeued = text.index("case "), text.index("set -- srun"), text.index('"$@" &')
    assert case < srun < requeued  # task i's command, under srun, as the script's child
