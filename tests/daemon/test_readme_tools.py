"""The README's per-tool tables (issue 27): every berth command beside an earlier tool's is run
here as the README writes it (`submit` with `--dry-run`: every check, nothing queued; the
others against a daemon), so the README cannot drift from what berth accepts."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from gjskit import fake_conda

README = Path(__file__).resolve().parents[2] / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(title)
    end = text.index("\n### ", start + 1)
    return text[start:end]


def _berth_commands(section: str, column: int) -> list[list[str]]:
    """The berth commands of a section's table: the code spans of its berth ``column``."""
    out = []
    rows = [r for r in section.splitlines() if r.startswith("| ") and "---" not in r]
    for row in rows[1:]:  # (the header)
        cells = row.strip("| ").split(" | ")
        for span in re.findall(r"`(berth [^`]+)`", cells[column] if len(cells) > column else ""):
            out.append(shlex.split(span))
    return out


def test_mgpu_sruns_table_runs_as_written(daemon):
    daemon.env.update(fake_conda(daemon.fake.root, envs=("myenv",)))  # (mgpu_srun's example env)
    daemon.start()
    commands = _berth_commands(_section("### Multi-GPU Scheduler"), 1)
    submits = [c for c in commands if c[1] == "submit"]
    assert len(submits) >= 6, commands
    seen = {}
    for argv in submits:
        out = daemon.berth("submit", "--dry-run", "--json", *argv[2:], cwd=str(daemon.fake.root))
        assert out.returncode == 0, (argv, out.stderr)
        job = json.loads(out.stdout)["job"]
        seen[" ".join(argv)] = job
    both = next(j for c, j in seen.items() if "--gpu-ids 0,1" in c)
    assert both["gpu_ids"] == [0, 1] and both["gpus"] == 2 and both["time_limit"] == 600
    assert both["mem"] == 8000 << 20 and both["by_memory"]  # 8000 MiB of each (issue 27.1)
    assert any(j.get("conda") == "myenv" for j in seen.values())
    assert any(j.get("priority") == 10 for j in seen.values())
    assert daemon.call("queue", all=True)["jobs"] == []  # dry runs queue nothing
    held = daemon.submit("true", hold=True)
    for argv in commands:
        if argv[1] in ("queue", "cancel"):
            words = [w.replace("<job_id>", str(held)) for w in argv[1:]]
            out = daemon.berth(*words)
            assert out.returncode == 0, (argv, out.stderr)
    assert daemon.job(held)["state"] == "CANCELLED"


def test_gpuselects_table_runs_as_written(fake_gpus):
    fake_gpus.setup(n=4, name="NVIDIA GeForce RTX 3090")
    commands = _berth_commands(_section("### gpuselect"), 1)
    selects = [c for c in commands if c[1] == "select"]
    assert len(selects) >= 6, commands
    for argv in selects:
        out = fake_gpus.berth(*argv[1:])
        assert out.returncode in (0, 1) and "usage:" not in out.stderr, (argv, out.stderr)


def test_scheduler_pys_table_runs_as_written(fake_gpus, tmp_path):
    """scheduler.py's rows: each `berth run`, `status`, `release` as the README writes it, in
    a directory with the examples' train.py and a `task` program on PATH."""
    import os
    import stat
    import sys

    fake_gpus.setup(n=4)
    (tmp_path / "train.py").write_text("import sys\nprint('ran', sys.argv[1:])\n")
    task = tmp_path / "task"
    task.write_text("#!/bin/sh\necho task ran\n")
    task.chmod(task.stat().st_mode | stat.S_IXUSR)
    python = tmp_path / "python"
    os.symlink(sys.executable, python)
    env = {"PATH": f"{tmp_path}:{os.environ['PATH']}"}
    commands = _berth_commands(_section("### scheduler.py"), 1)
    runs = [c for c in commands if c[1] == "run" and "python ..." not in c]  # (refused, said)
    assert len(runs) >= 3, commands
    for argv in [*runs, *(c for c in commands if c[1] in ("status", "release"))]:
        out = fake_gpus.berth(*argv[1:], env=env, cwd=str(tmp_path))
        assert out.returncode == 0, (argv, out.stderr)
        if argv[1] == "run":
            assert "ran" in out.stdout or (tmp_path / "out.txt").exists(), (argv, out.stdout)


def test_the_gpu_job_schedulers_table_runs_as_written(daemon):
    """The GPU Job Scheduler's rows: its CSV jobs file and llm_config.json (its README's, with
    /path/to/ scripts) in the directory, every `berth submit` checked as written
    (`--dry-run`: `--file` too, each line printed, nothing queued), `berth watch` once
    (`--scan`: it queues the file's three lines), `status`, `queue`, `pause`, `resume` and
    `select` run. (`berth daemon` is the fixture's; `berth attach` needs a terminal.)"""
    from gjskit import JOBS_TXT, LLM_CONFIG, SCRIPT, berth_inside, start_with_path_to

    daemon.env.update(fake_conda(daemon.fake.root, envs=("pytorch_env", "myenv")))
    where = str(daemon.fake.root)
    (daemon.fake.root / "jobs.txt").write_text(JOBS_TXT)
    (daemon.fake.root / "llm_config.json").write_text(LLM_CONFIG)
    scripts = dict.fromkeys(("train.py", "eval.py", "inference.py", "script.py"), SCRIPT)
    start_with_path_to(daemon, scripts)
    section = _section("### GPU Job Scheduler")
    assert "0,/path/to/train.py,pytorch_env,--llm qwen2.5-7b-inst --epochs 100,0-3" in section
    commands = _berth_commands(section, 1)
    assert {c[1] for c in commands} >= {"daemon", "submit", "watch", "status", "queue", "pause",
                                        "resume", "select", "attach"}, commands  # fmt: skip
    jobs = []
    for argv in commands:
        if argv[1] in ("daemon", "attach"):
            continue
        words = argv[1:]
        if argv[1] == "submit":
            words = ["submit", "--dry-run", "--json", *argv[2:]]
        elif argv[1] == "watch":
            words = [*argv[1:], "--scan", "--state", str(daemon.fake.root / "watch.state")]
        out = berth_inside(daemon, *words, cwd=where)
        assert out.returncode in ((0, 1) if argv[1] == "select" else (0,)), (argv, out.stderr)
        assert "usage:" not in out.stderr, (argv, out.stderr)
        if argv[1] == "submit":
            jobs.append(out.stdout)
    assert len(jobs) >= 3 and '"--cuda=machine"' in "".join(jobs)
    file_dry = next(j for j in jobs if '"line"' in j)  # --file --dry-run: one per line
    assert len(file_dry.splitlines()) == 3 and "/path/to/inference.py" in file_dry
    queued = daemon.call("queue", all=True)["jobs"]
    assert len(queued) == 3  # the watcher's three lines; dry runs queued nothing
    refused = berth_inside(daemon, "watch", "--dry-run", "jobs.txt", cwd=where)
    assert refused.returncode == 2 and "berth submit --file jobs.txt --dry-run" in refused.stderr
    assert len(daemon.call("queue", all=True)["jobs"]) == 3  # (a watcher would have queued)


def test_gpu_schedulers_table_runs_as_written(fake_gpus, tmp_path):
    """GPU Scheduler's rows: each `berth run`, `select` and `status` as the README writes it,
    on idle GPUs drawing 40 W (under the README's 50 W threshold)."""
    import os
    import sys

    fake_gpus.setup(n=4, power_mw=40000)
    (tmp_path / "train.py").write_text("import os\nprint('ran on', os.environ['CUDA_VISIBLE_DEVICES'])\n")
    os.symlink(sys.executable, tmp_path / "python")
    env = {"PATH": f"{tmp_path}:{os.environ['PATH']}"}
    commands = _berth_commands(_section("### GPU Scheduler"), 1)
    assert {c[1] for c in commands} == {"run", "select", "status"}, commands
    for argv in commands:
        out = fake_gpus.berth(*argv[1:], env=env, cwd=str(tmp_path))
        assert out.returncode == 0, (argv, out.stderr)
        if argv[1] == "run":
            assert "ran on" in out.stdout, (argv, out.stdout)
    two = next(c for c in commands if "-g" in c)
    out = fake_gpus.berth(*two[1:], env=env, cwd=str(tmp_path))
    assert out.stdout.split("ran on ")[1].count(",") == 1  # two GPUs


def test_gflows_table_runs_as_written(daemon):
    """gflow's rows: every berth command of the README's table run against a daemon as
    written (`submit` and `sweep` with `--dry-run`: every check, nothing queued), in a
    directory with a `train.sh` of `#BERTH` lines; `alice` is the user running the test,
    `<job_id>` a pending job (an ended one for `logs` and `resubmit`), `<reservation_id>` the
    reservation the table's `admin reserve` made, `ml-research` a project of the config.
    (`berth daemon` is the fixture's, `berth
    attach` needs a terminal, `berth mcp` an agent on its stdin: tests/daemon/test_mcp.py.)"""
    import getpass

    daemon.env.update(fake_conda(daemon.fake.root, envs=("myenv",)))
    config = daemon.fake.root / "berth.toml"  # (the table's --project: a dry run checks it)
    config.write_text(f'[projects.ml-research]\nusers = ["{getpass.getuser()}"]\n')
    daemon.env["BERTH_CONFIG"] = str(config)
    daemon.start()
    where = str(daemon.fake.root)
    (daemon.fake.root / "train.sh").write_text("#!/bin/sh\n#BERTH --gpus=2 -t 2:00:00\ntrue\n")
    section = _section("### Coming from gflow")
    assert "gflow 0.4.18" in section and "docs/scheduling.md#coming-from-gflow" in section
    commands = _berth_commands(section, 1)
    assert {c[1] for c in commands} >= {
        "daemon", "submit", "sweep", "queue", "status", "cancel", "show", "logs", "hold",
        "release-job", "update", "resubmit", "attach", "pause", "resume", "admin", "mcp",
    }, commands  # fmt: skip
    for _ in range(5):  # jobs 1 to 5, which the table's dependencies name
        daemon.submit("true", hold=True)
    ended = daemon.submit("true", gpus=0.5)
    daemon.wait_done([ended])
    held = daemon.submit("true", hold=True)  # pending: -g 2 still fits (4 GPUs)
    pending = daemon.submit("true", dependency=f"afterok:{held}")  # stays pending when released
    me = getpass.getuser()
    dry = {}
    for argv in commands:
        if argv[1] in ("daemon", "attach", "mcp"):
            continue
        job = str(ended if argv[1] in ("logs", "resubmit") else pending)
        words = [w.replace("<job_id>", job) if w != "alice" else me for w in argv[1:]]
        if words[0] in ("submit", "sweep"):
            words[1:1] = ["--dry-run", "--json"]
        if "<reservation_id>" in words:
            listed = daemon.berth("admin", "reservations", "--json").stdout
            (r,) = json.loads(listed)["reservations"]
            words[words.index("<reservation_id>")] = str(r["id"])
        out = daemon.berth(*words, cwd=where)
        assert out.returncode == 0, (argv, out.stderr)
        assert "usage:" not in out.stderr, (argv, out.stderr)
        if words[0] == "submit":
            dry[" ".join(argv)] = json.loads(out.stdout)["job"]
    assert len(dry) >= 9, sorted(dry)
    jobs = list(dry.values())
    assert any(j.get("by_memory") and j.get("mem") == 20 << 30 for j in jobs)  # --gpu-memory
    assert any(j.get("dependency") == "afterok:4?afterok:5" for j in jobs)  # any of, not both
    assert any(j.get("conda") == "myenv" and j.get("project") == "ml-research" for j in jobs)
    script = next(j for c, j in dry.items() if "train.sh" in c)
    assert script["gpus"] == 2 and script["time_limit"] == 2 * 3600
    rows = {j["id"]: j for j in daemon.call("queue", all=True)["jobs"]}
    assert len(rows) == 9 and rows[pending]["state"] == "CANCELLED"  # + the resubmitted one
    shown = daemon.berth("show", str(pending)).stdout
    assert "updated: gpus 1 -> 2 by" in shown  # (update -g 2, before the cancel)
    assert daemon.call("reservations")["reservations"] == []  # reserved, then unreserved


def test_gflows_full_table_names_only_options_berth_has():
    """docs/scheduling.md's full gflow table: every option in its berth column is one that
    `berth COMMAND --help` lists (a bare option in the gbatch part is `berth submit`'s), so
    the doc cannot name an option berth does not have."""
    import subprocess
    import sys

    doc = (README.parent / "docs" / "scheduling.md").read_text()
    start = doc.index("## Coming from gflow")
    section = doc[start : doc.index("\n## ", start + 1)]
    assert "902a74efff31c32d8e2e13d578aa2a3717e344bf" in section  # the gflow it is based on
    helps: dict[tuple[str, ...], str] = {}
    checked = 0
    for part in section.split("\n### ")[1:]:
        default = ("submit",) if part.startswith("Submitting") else None
        rows = [r for r in part.splitlines() if r.startswith("| ") and "---" not in r][1:]
        for row in rows:
            cells = row.strip("| ").split(" | ")
            for span in re.findall(r"`([^`]+)`", cells[1] if len(cells) > 1 else ""):
                words = shlex.split(span)
                if words[:2] == ["berth", "help"]:  # (berth help config: it runs)
                    cmd = [sys.executable, "-m", "berth.cli.main", *words[1:]]
                    assert subprocess.run(cmd, capture_output=True, check=False).returncode == 0
                    continue
                if words[0] == "berth":
                    n = 3 if words[1] == "admin" and len(words) > 2 else 2
                    command, rest = tuple(words[1:n]), words[n:]
                elif words[0].startswith("-") and default:
                    command, rest = default, words
                else:
                    continue  # (a config key, a variable)
                if command not in helps:
                    helps[command] = subprocess.run(
                        [sys.executable, "-m", "berth.cli.main", *command, "--help"],
                        capture_output=True, text=True, check=True,
                    ).stdout  # fmt: skip
                for word in rest:
                    if word.startswith("-") and word not in ("-", "--"):
                        option = re.escape(word.split("=")[0])
                        listed = re.search(rf"(^|[\s\[,(]){option}(?![\w-])", helps[command])
                        assert listed, (span, word)
                        checked += 1
    assert checked >= 50, checked
