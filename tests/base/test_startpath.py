"""What the commands people run all the time load: the start path stays light.

berth's modules follow one import rule (docs/ARCHITECTURE.md, "Imports"): a module the CLI
start path loads imports at its top only what every run of it needs, and the rest in the
function that needs it; modules that run only in the daemon or the simulator import at the
top. These tests keep the first half honest: `berth status`, `select`, `queue`, `submit`
and `--help` load no scheduling core, no daemon, and none of the standard modules that
cost a CLI start several milliseconds each (``dataclasses`` pulls in ``inspect``: ~6 ms;
``typing`` ~2 ms; ``asyncio``, ``sqlite3`` more), so `berth submit` in a loop of a thousand
stays a matter of seconds. bench/startup.py measures the times themselves.

`berth submit`'s common form goes further (issue 21): no ``re`` nor what it needs (enum,
functools...), hence no argparse (read by berth/cli/quickargs.py instead), no gettext or
locale (argparse's messages), no json (the wire uses json's C accelerator,
berth/wire/cjson.py). The probe reports the modules a command loads beyond those the
interpreter had at its start (an editable install's import hook loads ``re`` at start-up).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import wait_until

TYPE_CHECKING = False
if TYPE_CHECKING:
    from conftest import FakeGpus

HEAVY = ("typing", "dataclasses", "inspect", "asyncio", "sqlite3")
LAYERS = ("berth.core", "berth.daemon", "berth.sim", "berth.web")

# Commands may leave by os._exit (FAST_EXIT): the probe writes what is loaded on every way out.
PROBE = """
import os, sys
had = set(sys.modules)
out, sys.argv = sys.argv[1], ["berth", *sys.argv[2:]]
def report(code):
    with open(out, "w") as f:
        f.write(f"{code}\\n" + "\\n".join(sorted(set(sys.modules) - had)))
real_exit = os._exit
def _exit(code):
    report(code)
    real_exit(code)
os._exit = _exit
try:
    from berth.cli.main import main
    code = main()
except SystemExit as e:
    code = e.code
report(code)
"""


def _loaded(rig: FakeGpus, tmp: Path, *args: str) -> tuple[str, set[str]]:
    out = tmp / "modules.txt"
    subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *args],
        env=rig.env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    code, *names = out.read_text().splitlines()
    return code, set(names)


def _heavy(names: set[str]) -> list[str]:
    return sorted(
        n for n in names if n in HEAVY or any(n == p or n.startswith(p + ".") for p in LAYERS)
    )


@pytest.fixture
def daemon(fake_gpus: FakeGpus) -> Iterator[FakeGpus]:
    fake_gpus.setup(n=2)
    started = fake_gpus.berth("daemon")
    assert started.returncode == 0, started.stderr
    wait_until(lambda: fake_gpus.berth("queue").returncode == 0, timeout=20,
               message="the daemon to answer")  # fmt: skip
    yield fake_gpus
    fake_gpus.berth("daemon", "--stop")


@pytest.mark.parametrize(
    ("args", "witness"),
    [(("status",), "pynvml"), (("select",), "pynvml"), (("--help",), "berth.cli.main"),
     (("queue",), "berth.client"), (("submit", "--", "true"), "berth.client"),
     (("submit", "-g", "2", "-t", "1h", "-J", "x", "--", "python", "train.py"), "berth.client"),
     (("__complete", "jobs"), "berth.client"), (("__complete", "gpus"), "pynvml")],
    ids=lambda a: " ".join(a) if isinstance(a, tuple) else "",
)  # fmt: skip
def test_a_frequent_command_loads_no_core_daemon_or_costly_stdlib(
    daemon: FakeGpus, tmp_path: Path, args: tuple[str, ...], witness: str
) -> None:
    code, names = _loaded(daemon, tmp_path, *args)
    assert code in ("0", "None"), f"berth {' '.join(args)} exited {code}"
    assert witness in names  # the probe saw the command's own imports
    assert _heavy(names) == [], (
        f"`berth {' '.join(args)}` now loads {_heavy(names)}: keep these off the start path "
        "(import in the function that needs them; a typed record without dataclasses: "
        "__slots__ as berth/devices/model.py)"
    )


# What `berth submit`'s common form must not load (each costs its start a millisecond or more,
# together ~9 ms: argparse, gettext and locale for its messages, json, and re with what it
# needs). A command line the quick reader leaves to argparse (--help, an error) may load them.
NOT_FOR_SUBMIT = (
    "re", "enum", "functools", "collections", "operator", "types", "argparse", "gettext",
    "locale", "json", "json.decoder", "json.encoder", "json.scanner", "importlib", "warnings",
    "math",
)  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [("submit", "--hold", "--", "true"),
     ("submit", "-g", "2", "-t", "1h", "-J", "x", "--", "python", "train.py", "--epochs", "3"),
     ("submit", "-g0.5", "--mem=2G", "--priority=3", "--export", "NONE", "true"),
     ("submit", "--hold", "--wrap", "echo a && echo b")],
    ids=" ".join,
)  # fmt: skip
def test_submits_common_form_loads_no_re_argparse_or_json(
    daemon: FakeGpus, tmp_path: Path, args: tuple[str, ...]
) -> None:
    code, names = _loaded(daemon, tmp_path, *args)
    assert code in ("0", "None"), f"berth {' '.join(args)} exited {code}"
    assert {"berth.client", "berth.cli.quickargs"} <= names  # it submitted, read quickly
    assert sorted(names & set(NOT_FOR_SUBMIT)) == [], (
        f"`berth {' '.join(args)}` now loads {sorted(names & set(NOT_FOR_SUBMIT))}: keep "
        "them off submit's path (import them where they are needed: --help, errors, --json)"
    )


# -- docs/ARCHITECTURE.md's start path: every file a job crosses, each once ------------------

ARCH = Path(__file__).resolve().parents[2] / "docs" / "ARCHITECTURE.md"
# Issue 38: at most 12 files; the path crosses this many now, and may only shrink.
MOST = 12


def _start_path(text: str) -> list[tuple[str, str]]:
    """The list under "From `berth submit` to the job's process": (arrow, file), the first
    with arrow ""."""
    block = text.split("### From `berth submit` to the job's process", 1)[1]
    block = block.split("```", 2)[1]
    out = []
    for line in block.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] in ("->", "=>"):
            out.append((words[0], words[1]))
        elif not line.startswith(" "):
            out.append(("", words[0]))
    return out


def _module(file: str) -> str:
    """The module a file of the list is (the daemon's rooms named without ``daemon/``)."""
    root = ARCH.parents[1] / "berth"
    where = file if (root / file).exists() or not (root / "daemon" / file).exists() else f"daemon/{file}"
    return "berth." + where.removesuffix(".py").replace("/", ".")


def _problems(steps: list[tuple[str, str]]) -> list[str]:
    from test_import_cycles import edges, modules

    known = modules()
    out = []
    names = [f for _, f in steps]
    out += [f"{f} named twice" for f in sorted({f for f in names if names.count(f) > 1})]
    side: list[str] = []  # the steps since the last hand-over
    for arrow, file in steps:
        mod = _module(file)
        if mod not in known:
            out.append(f"{file}: no such file under berth/")
            continue
        if arrow == "->":
            by = [s for s in side if mod in edges(s, known[s], known, typing=False)]
            if not by:
                out.append(f"-> {file}: no step above it imports it (a file between is missing)")
        else:
            side = []
        side.append(mod)
    return out


def test_the_start_path_in_the_architecture_page_is_the_one_the_code_takes() -> None:
    steps = _start_path(ARCH.read_text())
    assert steps[0] == ("", "cli/submit.py") and steps[-1][1] == "supervisor/attempt.py"
    assert _problems(steps) == []
    assert len(steps) <= MOST, f"{len(steps)} files on the start path: at most {MOST}"


def test_the_start_path_check_sees_a_missing_file_a_duplicate_and_a_file_gone() -> None:
    steps = _start_path(ARCH.read_text())
    without = [s for s in steps if s[1] != "procs/pool.py"]  # port -> pool -> serve
    assert _problems(without) == [
        "-> supervisor/serve.py: no step above it imports it (a file between is missing)"
    ]
    assert _problems([*steps, ("=>", "client.py")]) == ["client.py named twice"]
    assert _problems([*steps, ("->", "engine/endings.py")]) == [
        "engine/endings.py: no such file under berth/"
    ]
