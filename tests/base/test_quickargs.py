"""`berth submit`'s quick reader (berth/cli/quickargs.py) against argparse: for every command
line it reads, the same namespace and the same job (or the same refusal) as the parser `berth
submit` builds from the same declarations; for anything else it steps aside (None) and
argparse reads the line as before."""

from __future__ import annotations

import argparse
import os
import random
from collections.abc import Iterator
from typing import Any

import pytest

from berth import config
from berth.cli import main, quickargs, submit_options
from berth.cli.backend import options as backend_options
from berth.cli.submit import job_spec
from berth.errors import UsageError

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "X": "1"}

# Between them every option of submit, by each of its names; `--` and no `--`; `=` forms;
# short options with their value attached; repeated options; --wrap; values that hold spaces,
# `=`, or are empty.
LINES: list[str] = [
    "--hold -- true",
    "true",
    "-- true",
    "--",
    "",
    "-g 2 -t 1h -J x -- python train.py --epochs 10",
    "-g2 -t90 -Jname -p5 python train.py -g 3",
    "--gpus=0.5 --mem=12G -- python eval.py",
    "--count 1 --mem 8000 --gpu-ids 0,1 --prefer 1 --gpu-name A100 -- x",
    "-N 1 --nodes 1 --ntasks-per-node 1 -- x",
    "-N2 --ntasks-per-node=4 -- x",
    "--time 2:00:00 -- x",
    "--time-limit 90 -- x",
    "-t 90 --time-limit 90 -- x",
    "'--job-name=my job' -- x",
    "--priority 10 --priority=3 -- x",
    "-o out-%j.log -e err-%j.log -D / -- x",
    "--output o --error e --chdir=/ -- x",
    "--env-setup 'source venv/bin/activate' --env-setup-cmd 'source b' -- x",
    "--conda no-such-env-here -- x",
    "--export NONE -- x",
    "--export=X,PATH -- x",
    "-d afterok:41 -- x",
    "--dependency=afterany:3:4?afterok:5 -- x",
    "-A vision --project vision -- x",
    "--account=lab -- x",
    "--retries 2 --requeue -- x",
    "--retries=-1 -- x",
    "--no-requeue -- x",
    "--requeue --no-requeue --requeue -- x",
    "--max-requeues 3 -- x",
    "--max-requeues 2 --no-requeue -- x",
    "--begin 2030-12-01T09:00 -- x",
    "--pty --keep-idle --unique -- x",
    "--retry-oom --no-learned-mem -g 0.5 -- x",
    "--requirements /no/such/llm_config.json -- python eval.py --llm qwen",
    "--inject-arg=--cuda -- python train.py",
    "--inject-arg=--cuda=machine --wrap 'echo {cuda}'",
    "--notify 'notify-send done' --mail-user me@example.org -- x",
    "--mail-user=-me -- x",
    "--mail-user me@example.org --mail-type begin,FAIL -- x",
    "--mail-type=ALL -- x",
    "--wrap 'python a.py && python b.py'",
    "--wrap 'python a.py' -- python b.py",
    "--wait -i --interactive -- x",
    "--file jobs.txt",
    "--parsable --json --dry-run -- x",
    "--backend local --array 0-9%2 -- x",
    "--backend=slurm --partition gpu --mem-per-gpu 32G --sbatch-arg=--qos=high -- x",
    "--sbatch-arg a --sbatch-arg b --sbatch-arg=c -- x",
    "-g 0 -- x",
    "-g abc -- x",
    "--mem=8= -J '' -- x",
    "-- -g 2 --hold",
    "-- -- true",
    "true -- false",
    "-i python -i",
    "-t1:00 -- 'python train.py --x 5'",
]

# Lines the quick reader must leave to argparse (help, errors, forms argparse has rules for).
ARGPARSE: list[str] = [
    "-h",
    "--help -- true",
    "--hold -h -- x",
    "--gpu 2 -- x",  # an abbreviation (argparse: ambiguous)
    "--gpu-i 0 -- x",  # an abbreviation (argparse: --gpu-ids)
    "--unknown -- x",
    "-ig2 -- x",  # a cluster of short options
    "-x -- x",
    "-J -x -- x",  # a value that starts with -
    "-p -5 -- x",
    "-g=2 -- x",
    "-g-1 -- x",
    "--mem= -- x",
    "--hold=yes -- x",
    "-ifoo -- x",
    "-g",
    "-J",
    "-p x -- x",
    "-N two -- x",
    "--retries=one -- x",
    "- x",
    "--inject-arg --cuda -- python train.py",  # (submit's glue: argparse's path)
    "--sbatch-arg --exclusive -- x",
    "/bin/true",  # a script: its #BERTH/#SBATCH lines (main's check, not the reader's)
    "--wrap=-- -- x",  # argparse drops a `--` given with `=` (its value: [])
    "python train.py --gpu 1",  # argparse: "ambiguous option" even in the command
    "-g 1 python train.py --n=2",
]


def _words(line: str) -> list[str]:
    import shlex

    return shlex.split(line)


@pytest.fixture
def no_config(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("BERTH_CONFIG", "")
    config.reset()
    yield
    config.reset()


def _parser() -> argparse.ArgumentParser:
    return main._parser("submit", main._load("submit"))


def _quick(words: list[str]) -> argparse.Namespace | None:
    module = main._load("submit")
    return main._quick("submit", module, words)


def _plain(ns: argparse.Namespace) -> dict[str, Any]:
    """The namespace as a dict; the command's leading ``--`` is the command's reader's to drop
    (berth.cli.command.words), kept by argparse 3.10-3.12 and by the quick reader."""
    out = dict(vars(ns))
    argv = out["argv"]
    out["argv"] = argv[1:] if argv[:1] == ["--"] else argv
    return out


def _job(ns: argparse.Namespace) -> object:
    try:
        return job_spec(ns, environ=dict(ENV)).to_dict()
    except UsageError as e:
        return ("refused", str(e))


@pytest.mark.parametrize("line", LINES)
def test_the_quick_reader_reads_a_line_as_argparse_does(no_config: None, line: str) -> None:
    words = _words(line)
    quick = _quick(words)
    assert quick is not None, f"the quick reader left {line!r} to argparse"
    parsed = _parser().parse_args(words)
    assert _plain(quick) == _plain(parsed)
    assert _job(quick) == _job(parsed)


def test_the_lines_name_every_option_of_submit() -> None:
    parser = _parser()
    named = {w.partition("=")[0] for line in LINES for w in _words(line)}
    named |= {w[:2] for line in LINES for w in _words(line) if w[:1] == "-" and w[1:2] != "-"}
    every = set(parser._option_string_actions) - {"-h", "--help"}
    assert every - named == set()


def test_the_quick_reader_knows_every_option_the_parser_has() -> None:
    """One declaration: the reader's table is the parser's options (bar argparse's -h)."""
    table = quickargs._table([*submit_options.declared(), *backend_options("submit")])
    assert table is not None
    assert set(table[0]) == set(_parser()._option_string_actions) - {"-h", "--help"}


@pytest.mark.parametrize("line", ARGPARSE)
def test_anything_else_is_left_to_argparse(line: str) -> None:
    assert _quick(_words(line)) is None


def test_a_declaration_it_does_not_understand_turns_it_off() -> None:
    command = (("argv",), {"nargs": "..."})
    for kw in ({"choices": ["a"]}, {"action": "count"}, {"nargs": 2}, {"type": float},
               {"type": int, "default": "3"}):  # fmt: skip
        assert quickargs.read([(("--x",), kw), command], ["--", "true"]) is None
    assert quickargs.read([(("--x",), {})], ["--", "true"]) is None  # no command
    assert quickargs.read([(("--x",), {}), command], ["--x", "1", "a"]) is not None


def test_submit_reads_its_common_form_without_building_the_parser(
    no_config: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_parser(*_: object) -> None:
        raise AssertionError("the parser was built")

    monkeypatch.setattr(main, "_parser", no_parser)
    monkeypatch.setenv("PATH", os.environ.get("PATH", "/usr/bin:/bin"))
    from berth.cli import submit_dry

    sent: list[dict[str, object]] = []  # (what goes to the daemon's dry run)
    monkeypatch.setattr(submit_dry, "ask", lambda kind, **fields: sent.append(fields["job"]))
    monkeypatch.setattr(submit_dry, "show", lambda reply, as_json: None)
    assert main.main(["submit", "--hold", "--dry-run", "-g", "0.5", "--", "true"]) == 0
    (job,) = sent
    assert job["hold"] is True and job["gpus"] == 0.5 and job["argv"] == ["true"]


def test_a_line_it_leaves_gets_argparses_error(
    no_config: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        main.main(["submit", "-J", "-x", "--", "true"])
    assert e.value.code == 2
    assert "-J/--job-name: expected one argument" in capsys.readouterr().err


# Generated command lines (issue 38, step 6): options by every name, in every form the reader
# knows and many it does not, with values that are numbers, words, empty, or look like options;
# at fixed seeds. Whenever the reader answers, argparse reads the line (no error) to the same
# namespace; whatever argparse refuses, the reader leaves to it.
_VALUES = ["2", "0.5", "x", "a b", "", "12G", "-5", "-x", "--", "=", "a=b", "1h", "0", "+3",
           " 7", "٣", "-", "--hold", "afterok:1"]  # fmt: skip
_COMMAND = ["python", "train.py", "--lr", "-g", "3", "--", "", "x y"]


def _line(rng: random.Random, parser: argparse.ArgumentParser) -> list[str]:
    options = sorted(set(parser._option_string_actions) - {"-h", "--help"})
    takes = {o: a.nargs != 0 for o, a in parser._option_string_actions.items()}
    words: list[str] = []
    for _ in range(rng.randint(0, 5)):
        name = rng.choice(options) if rng.random() < 0.95 else rng.choice(["--gpu", "-h", "-ig2"])
        value = rng.choice(_VALUES) if rng.random() < 0.3 else str(rng.randint(0, 99))
        form = rng.randrange(10)
        if not takes.get(name, False) and form < 8:
            words.append(name)
        elif form < 6 or not takes.get(name, False):
            words += [name, value] if rng.random() < 0.97 else [name]
        elif name.startswith("--"):
            words.append(f"{name}={value}")
        else:
            words.append(name + value)
    if rng.random() < 0.8:
        words += ["--"] if rng.random() < 0.6 else []
        words += rng.sample(_COMMAND, rng.randint(0, 4))
    return words


@pytest.mark.parametrize("seed", range(4))
def test_generated_lines_are_read_as_argparse_reads_them_or_left_to_it(
    no_config: None, seed: int, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(seed)
    parser = _parser()
    answered = 0
    for case in range(150):
        words = _line(rng, parser)
        quick = _quick(words)
        if quick is None:
            continue
        answered += 1
        where = f"seed {seed} case {case}: {words!r}"
        try:
            parsed = parser.parse_args(words)
        except SystemExit:
            pytest.fail(f"argparse refuses what the quick reader read: {where}")
        assert _plain(quick) == _plain(parsed), where
    capsys.readouterr()
    assert answered >= 50  # (it answers enough of them for the comparison to mean something)
