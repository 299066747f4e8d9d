"""GPU ids in the command (`--inject-arg --cuda`, in the job's numbering or the machine's;
`{gpus}` / `{cuda}`) and requirement tables (the GPU Job Scheduler's llm_config.json: `--llm NAME` ->
GPUs) (issue 12.3, 12.4)."""

from __future__ import annotations

import json
import subprocess
import sys

PRINT = "import sys, os; print(sys.argv[1:], os.environ['CUDA_VISIBLE_DEVICES'])"
TABLE = {"default_requirement": 1.0, "models": {"qwen2.5-3b-inst": 0.5,
         "qwen2.5-72b-inst": {"gpus": 2, "mem": "30G"}}}  # fmt: skip


def _run(daemon, *submit: str) -> str:
    """Submit, wait for the end, return the log."""
    r = daemon.berth("submit", "--json", *submit)
    assert r.returncode == 0, r.stderr
    reply = json.loads(r.stdout)
    assert daemon.wait_done([reply["job_id"]])[reply["job_id"]]["state"] == "COMPLETED"
    with open(reply["stdout"]) as f:
        return f.read().strip()


def test_inject_arg_gives_the_job_its_ids_in_either_numbering(daemon):
    daemon.start(gpus=4)
    py = [sys.executable, "-c", PRINT]
    # as the job sees them: its GPU 2 is its cuda:0
    out = _run(daemon, "--gpu-ids", "2", "--inject-arg", "--cuda", "--", *py, "x")
    assert out == "['x', '--cuda', '0'] 2"
    # the machine's numbers, as the GPU Job Scheduler passed them; an existing --cuda is rewritten
    out = _run(daemon, "--gpu-ids", "1,3", "--inject-arg=--cuda=machine", "--", *py, "--cuda", "7")
    assert out == "['--cuda', '1,3'] 1,3"
    out = _run(daemon, "--gpu-ids", "3", "--inject-arg", "--device", "--", *py, "--device=9", "y")
    assert out == "['--device=0', 'y'] 3"
    # placeholders: {gpus} the machine's, {cuda} the job's own, also in a --wrap string
    out = _run(daemon, "--gpu-ids", "2", "--", *py, "cuda:{cuda}", "on={gpus}")
    assert out == "['cuda:0', 'on=2'] 2"
    out = _run(daemon, "--gpu-ids", "1", "--wrap", "echo {gpus} {cuda} $CUDA_VISIBLE_DEVICES")
    assert out == "1 0 1"
    # without --inject-arg the command is left as it is (what went wrong before: --cuda 5
    # reached the script unchanged)
    out = _run(daemon, "--gpu-ids", "2", "--", *py, "--cuda", "5")
    assert out == "['--cuda', '5'] 2"


def test_inject_arg_refused_clearly(daemon):
    daemon.start(gpus=1)
    for args, said in (
        (["--inject-arg", "cuda", "--", "true"], "name an option of your command"),
        (["--inject-arg", "--cuda=mine", "--", "true"], "say whose GPU numbers: job"),
        (["--inject-arg", "--cuda", "--wrap", "true"], "in a --wrap string write {cuda}"),
    ):
        r = daemon.berth("submit", *args)
        assert r.returncode == 2 and said in r.stderr, r.stderr
    assert daemon.call("queue", all=True)["jobs"] == []


def test_a_requirement_table_maps_llm_to_gpus_and_show_says_so(daemon):
    daemon.start(gpus=4)
    table = daemon.fake.root / "llm_config.json"
    table.write_text(json.dumps(TABLE))
    r = daemon.berth("submit", "--requirements", str(table), "--hold", "--", "python", "eval.py",
                     "--llm", "qwen2.5-3b-inst")  # fmt: skip
    assert r.returncode == 0 and "GPUs from llm_config.json" in r.stdout, r.stderr
    job = daemon.job(1)
    assert job["request"]["gpus"] == 0.5
    assert job["request_source"] == "llm_config.json: --llm qwen2.5-3b-inst -> 0.5 GPU"
    shown = daemon.berth("show", "1").stdout
    assert "GPUs from llm_config.json: --llm qwen2.5-3b-inst -> 0.5 GPU" in shown
    # the table from the config file; memory too; -g given wins; unknown model: the default
    config = daemon.fake.root / "config.toml"
    config.write_text(f'[queue]\nrequirements = "{table.name}"\n')
    env = {"BERTH_CONFIG": str(config)}
    for argv, gpus, mem in (
        (["--", "python", "x.py", "--llm=qwen2.5-72b-inst"], 2, 30 << 30),
        (["-g", "1", "--", "python", "x.py", "--llm", "qwen2.5-3b-inst"], 1, None),
        (["--", "python", "x.py", "--llm", "mystery-1b"], 1, None),
        (["--", "python", "x.py"], 1, None),
    ):
        r = subprocess.run(
            [sys.executable, "-m", "berth.cli.main", "submit", "--parsable", "--hold", *argv],
            env={**daemon.env, **env}, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        job = daemon.job(int(r.stdout))
        assert (job["request"]["gpus"], job["request"]["mem"]) == (gpus, mem), argv
    assert "default_requirement" in daemon.job(4)["request_source"]
    assert daemon.job(5)["request_source"] is None
    bad = daemon.fake.root / "bad.json"
    bad.write_text('{"models": {"m": 1.5}}')
    r = daemon.berth("submit", "--requirements", str(bad), "--", "python", "x.py", "--llm", "m")
    assert r.returncode == 2 and "models.m = 1.5: the GPUs must be a whole number" in r.stderr
