"""Tab completion (issue 40.2): `berth completion bash|zsh|fish` prints a script each shell
loads; in each, typed into a real terminal (tmux), Tab completes a command, an option, a job
id (the daemon's) and a GPU id (NVML's). The commands come from `berth.cli.main.COMMANDS`,
the one table; job and GPU ids from the hidden `berth __complete`, silent without a daemon."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from helpers import wait_until
from termkit import Tmux

from berth.cli.main import COMMANDS

BIN = os.path.dirname(sys.executable)  # (the venv's `berth`)


def _shell(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is needed for this test (apt-get install {name})")
    return path


def _env(daemon) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {**daemon.env, "PATH": f"{BIN}:{os.environ['PATH']}"}


def _script(daemon, shell: str) -> str:  # type: ignore[no-untyped-def]
    made = daemon.berth("completion", shell)
    assert made.returncode == 0, made.stderr
    path = os.path.join(daemon.fake.root, f"berth.{shell}")
    with open(path, "w") as f:
        f.write(made.stdout)
    return path


def test_each_script_loads_and_names_every_command(daemon):
    env = _env(daemon)
    bash = subprocess.run([_shell("bash"), "-c", "source <(berth completion bash); complete -p berth; "
                           "COMP_WORDS=(berth ''); COMP_CWORD=1; _berth; echo ${COMPREPLY[@]}"],
                          env=env, capture_output=True, text=True, check=False)  # fmt: skip
    assert bash.returncode == 0 and "-F _berth berth" in bash.stdout, bash.stderr
    offered = set(bash.stdout.splitlines()[-1].split())
    assert set(COMMANDS) | {"help"} <= offered, set(COMMANDS) - offered  # the one table
    zsh = subprocess.run([_shell("zsh"), "-f", "-c", "autoload -U compinit; compinit -u; "
                          "source <(berth completion zsh); print -- $_comps[berth]"],
                         env=env, capture_output=True, text=True, check=False)  # fmt: skip
    assert zsh.returncode == 0 and zsh.stdout.strip() == "_berth", zsh.stdout + zsh.stderr
    fish = subprocess.run([_shell("fish"), "--no-config", "-c",
                           "berth completion fish | source; complete -C 'berth queue --no'"],
                          env=env, capture_output=True, text=True, check=False)  # fmt: skip
    assert fish.returncode == 0 and fish.stdout.startswith("--noheader\t"), fish.stdout + fish.stderr
    bad = daemon.berth("completion", "tcsh")
    assert bad.returncode == 2 and "tcsh" in bad.stderr


def test_complete_lists_job_ids_and_gpu_ids_and_is_silent_without_a_daemon(daemon):
    daemon.fake.setup(n=2)
    quiet = daemon.berth("__complete", "jobs")  # no daemon yet
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""
    daemon.start()
    job = daemon.submit("true", hold=True, name="train-a")
    jobs = daemon.berth("__complete", "jobs")
    assert jobs.returncode == 0, jobs.stderr
    assert f"{job}\ttrain-a (PENDING, " in jobs.stdout
    gpus = daemon.berth("__complete", "gpus")
    assert [ln.split("\t")[0] for ln in gpus.stdout.splitlines()] == ["0", "1"], gpus.stdout
    assert daemon.berth("__complete", "nope").returncode == 2


START = {
    "bash": "{shell} --norc --noprofile",
    "zsh": "{shell} -f",
    "fish": "{shell} --no-config",
}
LOAD = {
    "bash": "source {script}",
    "zsh": "autoload -U compinit; compinit -u; source {script}",
    "fish": "source {script}",
}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_tab_completes_commands_options_job_and_gpu_ids(daemon, shell):
    daemon.fake.setup(n=1)
    daemon.start()
    job = daemon.submit("true", hold=True, name="only-job")
    script = _script(daemon, shell)
    env = " ".join(f"{k}='{v}'" for k, v in _env(daemon).items() if "'" not in v)
    start = START[shell].format(shell=_shell(shell))
    with Tmux(f"env -i {env} TERM=xterm HOME={daemon.fake.root} {start}", columns=120) as t:
        wait_until(lambda: any(ln.strip() for ln in t.screen()), timeout=20, message="a prompt")
        t.keys(LOAD[shell].format(script=script), "Enter")

        def typed(keys: str, want: str) -> None:
            t.keys("C-u")
            t.keys("-l", keys)
            t.keys("Tab")
            wait_until(lambda: any(want in ln for ln in t.screen()), timeout=20,
                       message=f"{keys!r} + Tab -> {want!r} in {shell}")  # fmt: skip

        typed("berth stat", "berth status")
        typed("berth queue --nohe", "berth queue --noheader")
        typed("berth show ", f"berth show {job}")
        typed("berth pause ", "berth pause 0")
        t.keys("C-u")


def test_a_job_name_cannot_forge_completions_or_reach_the_terminal(daemon):
    """Another user's job name is input: a tab, a newline or an escape in it must not add a
    word to my completion (a line of its own: `99`) nor reach my terminal."""
    daemon.start()
    evil = daemon.submit("true", hold=True, name="x\t99\n100\x1b]0;pwned\x07")
    plain = daemon.submit("true", hold=True, name="plain")
    out = daemon.berth("__complete", "jobs")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [ln.split("\t")[0] for ln in lines] == [str(evil), str(plain)], lines
    assert all(ln.count("\t") == 1 and "\x1b" not in ln and "\x07" not in ln for ln in lines)
