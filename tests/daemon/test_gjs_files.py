"""The GPU Job Scheduler's own files, as its README gives them: jobs.txt (CSV, lower priority first,
conda environments, allowed GPUs with ranges and commas) and llm_config.json run unchanged
through `berth submit --file`; a file berth cannot read queues nothing and names the line and
column (issue 12.1, 12.3)."""

from __future__ import annotations

import json
import os

import pytest
from gjskit import JOBS_TXT, LLM_CONFIG, SCRIPT, berth_inside, fake_conda, start_with_path_to
from helpers import wait_until

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "jobs-file.md")


def _docs_block() -> str:
    """docs/jobs-file.md's GPU Job Scheduler block, as a reader saves it (indent removed)."""
    with open(DOCS) as f:
        text = f.read()
    start = text.index("```", text.index("**the GPU Job Scheduler's CSV**"))
    start = text.index("\n", start) + 1
    block = text[start : text.index("```", start)]
    return "".join(line.strip() + "\n" for line in block.splitlines() if line.strip())


def test_the_docs_block_saved_as_a_file_is_queued_by_submit_and_watch(daemon):
    """docs/jobs-file.md's block starts with the format's header line, as the GPU Job
    Scheduler's README gives it: a file saved from it was refused by `submit --file` (the header
    read as a command), and `berth watch` left line 1 out, blaming the others (issue 40.7)."""
    root = daemon.fake.root
    block = _docs_block()
    assert block.startswith("priority,script_path,conda_env,arguments,allowed_gpus\n"), block
    start_with_path_to(daemon, {f"{s}.py": SCRIPT for s in ("train", "eval", "inference")})
    (root / "jobs.txt").write_text(block)
    env = {**fake_conda(root), "SEED_RESULTS": str(root)}
    r = berth_inside(daemon, "submit", "--file", "jobs.txt", "--hold", env=env, cwd=str(root))
    assert r.returncode == 0 and r.stdout.count("Submitted job") == 2, r.stderr
    state = str(root / "watch.json")
    r = berth_inside(daemon, "watch", "--scan", "--hold", "--state", state, "jobs.txt",
                     env=env, cwd=str(root))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "left out" not in r.stderr and "line 1" not in r.stderr, r.stderr
    assert r.stdout.count("queued job") == 2, (r.stdout, r.stderr)
    jobs = wait_until(lambda: daemon.call("queue", all=True)["jobs"], message="jobs listed")
    assert sorted(j["name"] for j in jobs) == ["inference.py"] * 2 + ["train.py"] * 2


def test_the_readme_jobs_txt_and_llm_config_run_unchanged(daemon):
    root = daemon.fake.root
    start_with_path_to(daemon, {f"{s}.py": SCRIPT for s in ("train", "eval", "inference")})
    (root / "jobs.txt").write_text(JOBS_TXT)
    (root / "llm_config.json").write_text(LLM_CONFIG)
    results = root / "results"
    results.mkdir()
    env = {**fake_conda(root), "SEED_RESULTS": str(results)}
    r = berth_inside(daemon, "submit", "--file", "jobs.txt", "--requirements",
                     "llm_config.json", env=env, cwd=str(root))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("Submitted job") == 3
    assert "the GPU Job Scheduler's format" in r.stderr and "priority P is berth priority -P" in r.stderr
    rows = daemon.wait_done([1, 2, 3])
    assert {i: rows[i]["state"] for i in rows} == {1: "COMPLETED", 2: "COMPLETED", 3: "COMPLETED"}
    ran = {p.name: json.loads(p.read_text()) for p in results.iterdir()}
    train, ev, inf = (ran[f"{s}.py.json"] for s in ("train", "eval", "inference"))
    jobs = {j["name"]: j for j in (daemon.job(i) for i in (1, 2, 3))}
    # priority: lower first in the GPU Job Scheduler, higher first in berth
    assert [jobs[n]["priority"] for n in ("train.py", "eval.py", "inference.py")] == [0, -1, -2]
    # 7b: 1 GPU out of 0-3; 3b: half a GPU, from llm_config.json; 32b: 1 GPU out of 4,5,6,7
    assert jobs["train.py"]["request"]["gpus"] == 1
    assert jobs["train.py"]["request"]["gpu_ids"] == [0, 1, 2, 3]
    assert jobs["eval.py"]["request"]["gpus"] == 0.5
    assert "llm_config.json: --llm qwen2.5-3b-inst -> 0.5 GPU" in jobs["eval.py"]["request_source"]
    assert jobs["inference.py"]["request"]["gpu_ids"] == [4, 5, 6, 7]
    assert int(inf["visible"]) in (4, 5, 6, 7) and int(train["visible"]) in (0, 1, 2, 3)
    # --cuda carries the GPUs it got, in the machine's numbers, as the GPU Job Scheduler passed them
    for rec in (train, ev, inf):
        assert rec["argv"][-2:] == ["--cuda", rec["visible"]], rec
    assert train["argv"][:4] == ["--llm", "qwen2.5-7b-inst", "--epochs", "100"]
    # the conda environment of the line, none for an empty field
    assert (train["conda"], ev["conda"], inf["conda"]) == ("pytorch_env", "pytorch_env", None)
    shown = daemon.berth("show", "2")
    assert "GPUs from llm_config.json: --llm qwen2.5-3b-inst -> 0.5 GPU" in shown.stdout


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (JOBS_TXT + "x,/path/to/eval.py,,,\n", "jobs.txt:5:1: priority 'x' is not an integer"),
        (JOBS_TXT + "python eval.py\n", "jobs.txt:5:1: this line is in berth's format, but line 2"),
        (JOBS_TXT.replace(",0-3", ",0-3x"), "jobs.txt:2:68: invalid allowed_gpus '0-3x'"),
        (JOBS_TXT.replace("eval.py", "missing.py"), "jobs.txt:3:3: script '/path/to/missing.py' "
                                                    "does not exist"),
        (JOBS_TXT.replace(",pytorch_env,--llm qwen2.5-3b", ",nope_env,--llm qwen2.5-3b"),
         "jobs.txt:3:20: conda_env 'nope_env': no such conda environment"),
        ("priority,script_path,conda_env,arguments,allowed_gpus\n",  # the header alone
         "--file 'jobs.txt' has no job"),
        ("priority,script_path\n",  # neither format
         "jobs.txt:1:1: no program 'priority,script_path' on "
         "PATH: the job would fail with exit code 127; nor is the line in the GPU Job Scheduler's format"),
        (JOBS_TXT.replace(",4,5,6,7", ",4,5,6,9"), "jobs.txt:4: no GPU 9 here"),  # the daemon's
    ],
)  # fmt: skip
def test_a_file_berth_cannot_run_queues_nothing_and_names_line_and_column(daemon, text, said):
    root = daemon.fake.root
    start_with_path_to(daemon, {f"{s}.py": SCRIPT for s in ("train", "eval", "inference")})
    (root / "jobs.txt").write_text(text)
    r = berth_inside(daemon, "submit", "--file", "jobs.txt", env=fake_conda(root), cwd=str(root))
    assert r.returncode == 2 and said in r.stderr, r.stderr
    assert daemon.call("queue", all=True)["jobs"] == []


def test_berths_own_lines_are_checked_as_well(daemon):
    daemon.start(gpus=2)
    jobs = daemon.fake.root / "jobs.txt"
    jobs.write_text("-g 1 -- true\n-- true --x\n  nosuchprogram --flag\n")
    r = daemon.berth("submit", "--file", str(jobs))
    assert r.returncode == 2
    assert f"{jobs}:3:3: no program 'nosuchprogram' on PATH" in r.stderr
    jobs.write_text("-g 1 --bogus -- true\n")
    r = daemon.berth("submit", "--file", str(jobs))
    assert r.returncode == 2 and f"{jobs}:1:6: unrecognized arguments: --bogus" in r.stderr
    assert daemon.call("queue", all=True)["jobs"] == []
    jobs.write_text(f"-- {os.path.realpath('/bin/true')}\n-J two -- true\n")
    r = daemon.berth("submit", "--file", str(jobs))
    assert r.returncode == 0 and r.stdout.count("Submitted job") == 2
