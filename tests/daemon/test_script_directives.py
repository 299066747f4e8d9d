"""`berth submit train.sh` reads the script's #BERTH and #SBATCH lines (issues 24.6, 22.8):
the command line wins, what the queue cannot honour is refused by name with its line number,
and nothing is queued then."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

SCRIPT = """#!/bin/bash
# a training run
#BERTH --gpus=2 -t 10
#SBATCH --job-name=train --output=out-%j.log
#SBATCH -t 5      # five minutes, as sbatch reads it
echo "gpus=$CUDA_VISIBLE_DEVICES"
#BERTH -p 9
"""


def _script(tmp: Path, text: str, mode: int = 0o755) -> str:
    path = tmp / "train.sh"
    path.write_text(text)
    os.chmod(path, mode)
    return str(path)


def _is_copy(path: str, script: str) -> None:
    """``path`` is the copy of ``script`` taken at submit: in the state dir, same name, same
    text."""
    assert path != script and os.path.basename(path) == os.path.basename(script)
    assert "/scripts/" in path and Path(path).read_bytes() == Path(script).read_bytes()


def _show(daemon, job_id: int) -> dict:  # type: ignore[no-untyped-def,type-arg]
    shown: dict = json.loads(daemon.berth("show", "--json", str(job_id)).stdout)  # type: ignore[type-arg]
    return shown


def test_directives_are_read_and_the_command_line_wins(daemon, tmp_path):
    daemon.start()
    script = _script(tmp_path, SCRIPT, mode=0o644)  # not executable: run by its #! line
    first = daemon.berth("submit", "--hold", script, cwd=str(tmp_path))
    assert first.returncode == 0, first.stderr
    job = _show(daemon, int(first.stdout.split()[2]))
    assert job["name"] == "train" and job["time_limit"] == 300.0 and job["priority"] == 0
    assert job["request"]["gpus"] == 2 and job["command"][0] == "/bin/bash"
    _is_copy(job["command"][1], script)
    assert job["stdout"] == str(tmp_path / f"out-{job['id']}.log")
    mine = daemon.berth("submit", "--hold", "-J", "mine", "-g", "1", "-t", "1", script)
    job = _show(daemon, int(mine.stdout.split()[2]))
    assert (job["name"], job["request"]["gpus"], job["time_limit"]) == ("mine", 1, 60.0)


def test_the_script_runs_from_its_path(daemon, tmp_path):
    daemon.start()
    script = _script(tmp_path, "#!/bin/sh\n#BERTH -J here\necho ran-$BERTH_JOB_ID\n")
    out = daemon.berth("submit", "--wait", "train.sh", cwd=str(tmp_path))  # (not on PATH)
    assert out.returncode == 0, out.stderr
    job_id = int(out.stderr.split()[2])
    (command,) = _show(daemon, job_id)["command"]
    _is_copy(command, script)
    assert f"ran-{job_id}" in daemon.berth("logs", str(job_id)).stdout


def test_a_compiled_program_runs_where_it_is_not_copied(daemon, tmp_path):
    """A virtual environment's python (a compiled program) is run by its own path: a copy
    taken "as a script" was the bare interpreter, without the environment's packages (found
    on a real GPU machine: `import torch` failed in every queued job, issue 37)."""
    daemon.start()
    code = "import sys; print(sys.executable); print(sys.prefix)"
    out = daemon.berth("submit", "--wait", "-g", "0", sys.executable, "-c", code)
    assert out.returncode == 0, out.stderr
    job_id = int(out.stderr.split()[2])
    assert _show(daemon, job_id)["command"][0] == sys.executable
    assert daemon.berth("logs", str(job_id)).stdout.splitlines() == [sys.executable, sys.prefix]


def test_gres_with_a_type_asks_for_that_gpu_name(daemon, tmp_path):
    daemon.start()
    script = _script(tmp_path, "#!/bin/sh\n#SBATCH --gres=gpu:a100:1\ntrue\n")
    out = daemon.berth("submit", "--hold", script)
    job = _show(daemon, int(out.stdout.split()[2]))
    assert job["request"]["gpus"] == 1 and job["request"]["name"] == "a100"


def test_what_cannot_be_honoured_is_refused_by_line(daemon, tmp_path):
    daemon.start()
    cases = {
        "#SBATCH --partition=big\n": "line 3: #SBATCH --partition=big: sbatch's --partition "
        "has no equal in berth's queue",
        "#SBATCH --mem=16G\n": "line 3: #SBATCH --mem=16G: --mem is host memory",
        "#BERTH --gpu 2\n": "line 3: #BERTH --gpu 2: ",
        "#BERTH python x.py\n": "'python x.py' is not a berth submit option",
        "#SBATCH --gres=mps:2\n": "the local queue knows only gpu:N",
        '#BERTH -J "open\n': "No closing quotation",
    }
    for line, said in cases.items():
        script = _script(tmp_path, "#!/bin/sh\n#BERTH -g 1\n" + line + "true\n")
        out = daemon.berth("submit", script)
        assert out.returncode == 2 and f"{script} " in out.stderr and said in out.stderr, (
            line, out.stderr)  # fmt: skip
    assert daemon.call("queue", all=True)["jobs"] == []


def test_partition_refused_is_not_listed_as_taken(daemon, tmp_path):
    """The refusal of `#SBATCH --partition` listed --partition among the #SBATCH options the
    local queue takes (issue 40.6): it lists what the local queue takes, and apart what only
    Slurm takes."""
    daemon.start()
    for line in ("#SBATCH --partition=big\n", "#SBATCH -p big\n"):
        script = _script(tmp_path, "#!/bin/sh\n" + line + "true\n")
        out = daemon.berth("submit", script)
        assert out.returncode == 2, out.stderr
        takes, _, slurm = out.stderr.partition("the local queue takes #SBATCH ")[2].partition(
            "(and Slurm alone")
        assert "--job-name" in takes and "--partition" not in takes, out.stderr
        assert "--mem-per-gpu" not in takes, out.stderr
        assert "--partition" in slurm and "--mem-per-gpu" in slurm, out.stderr
    assert daemon.call("queue", all=True)["jobs"] == []


def test_a_script_without_interpreter_or_x_bit_is_refused(daemon, tmp_path):
    daemon.start()
    script = _script(tmp_path, "#BERTH -g 1\necho hi\n", mode=0o644)
    out = daemon.berth("submit", script)
    assert out.returncode == 2 and "no #! line naming its interpreter" in out.stderr
    assert daemon.call("queue", all=True)["jobs"] == []


def test_sbatch_mail_type_is_read_as_the_option(daemon, tmp_path):
    daemon.start()
    mta = tmp_path / "mta"
    mta.mkdir()
    (mta / "sendmail").write_text("#!/bin/sh\ncat > /dev/null\n")
    (mta / "sendmail").chmod(0o755)
    daemon.env["PATH"] = f"{mta}:{os.environ['PATH']}"
    text = "#!/bin/sh\n#SBATCH --mail-user=me@example.org\n#SBATCH --mail-type=fail,BEGIN\ntrue\n"
    out = daemon.berth("submit", "--hold", _script(tmp_path, text))
    assert out.returncode == 0, out.stderr
    job = _show(daemon, int(out.stdout.split()[2]))
    assert job["mail_user"] == "me@example.org" and job["mail_type"] == "BEGIN,FAIL"
    bad = daemon.berth("submit", "--hold", _script(tmp_path, text.replace("fail,", "often,")))
    assert bad.returncode == 2 and "--mail-type 'often,BEGIN': give BEGIN, END" in bad.stderr


def test_what_runs_is_the_script_as_it_was_at_submit(daemon, tmp_path):
    """A held job's script edited before it runs: the copy taken at submit runs, as sbatch
    runs the copy it took (issue 34.8)."""
    daemon.start()
    script = _script(tmp_path, "#!/bin/sh\n#BERTH -g 1\necho as-submitted $(basename $0)\n")
    out = daemon.berth("submit", "--hold", script)
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.split()[2]
    _script(tmp_path, "#!/bin/sh\n#BERTH -g 1\necho edited\n")
    released = daemon.berth("release-job", job_id)
    assert released.returncode == 0, released.stderr
    done = daemon.berth("wait", job_id)
    assert done.returncode == 0, done.stderr
    assert daemon.berth("logs", job_id).stdout == "as-submitted train.sh\n"
    again = daemon.berth("submit", "--wait", script)  # (the edit is a new submit's)
    assert again.returncode == 0, again.stderr
    assert daemon.berth("logs", again.stderr.split()[2]).stdout == "edited\n"
