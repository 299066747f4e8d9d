"""Directives in a submitted script's leading comments: ``#BERTH`` and ``#SBATCH`` lines.

``berth submit train.sh`` reads, as sbatch does, the comment block at the top of the script
(after the ``#!`` line, up to the first line that is neither blank nor a comment)::

    #!/bin/bash
    #BERTH --gpus=2 -t 2:00:00
    #SBATCH --job-name=train --output=train-%j.log
    python train.py

``#BERTH`` lines hold `berth submit` options, as typed on the command line. ``#SBATCH`` lines
hold sbatch options; those berth has an equal for are taken as it (:data:`SBATCH`), the rest
become ``--sbatch-arg`` (passed to sbatch as written on the Slurm backend). The local queue
refuses those by name, with the line number (``sbatch_lines`` on the parsed options: each
such value -> its refusal, which :mod:`berth.cli.backend` raises), so one script runs on both
backends or says at once why not. Options on the command line win over directives
(they come after them), as with sbatch. Nothing here runs the script.
"""

from __future__ import annotations

import os
import shlex

from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator

# sbatch's option -> berth submit's, for those the local queue has an equal for. A value of
# None: the option takes no value.
SBATCH: dict[str, tuple[str, bool]] = {
    "--time": ("-t", True), "-t": ("-t", True),  # (both read a bare number as minutes)
    "--job-name": ("-J", True), "-J": ("-J", True),
    "--output": ("-o", True), "-o": ("-o", True),
    "--error": ("-e", True), "-e": ("-e", True),
    "--array": ("--array", True), "-a": ("--array", True),
    "--dependency": ("--dependency", True), "-d": ("--dependency", True),
    "--chdir": ("-D", True), "-D": ("-D", True),
    "--export": ("--export", True),
    "--mail-user": ("--mail-user", True),
    "--mail-type": ("--mail-type", True),
    "--requeue": ("--requeue", False), "--no-requeue": ("--no-requeue", False),
    "--hold": ("--hold", False), "-H": ("--hold", False),
    "--begin": ("--begin", True), "-b": ("--begin", True),
    "--account": ("--project", True), "-A": ("--project", True),
    "--gpus": ("-g", True), "-G": ("-g", True),
    "--gpus-per-node": ("-g", True),  # N or TYPE:N per node, as berth's -g (TYPE -> --gpu-name)
    "--gres": ("-g", True),  # gpu:N or gpu:TYPE:N (TYPE -> --gpu-name)
    "--partition": ("--partition", True), "-p": ("--partition", True),  # (Slurm only)
    "--mem-per-gpu": ("--mem-per-gpu", True),  # (Slurm only: host RAM)
    "--nodes": ("-N", True), "-N": ("-N", True),  # (more than 1: Slurm only)
    "--ntasks-per-node": ("--ntasks-per-node", True),
}  # fmt: skip
SLURM_ONLY = ("--partition", "--mem-per-gpu")  # berth options the local queue refuses

# sbatch options whose meaning the local queue does not have, with what to do instead.
HOST_MEMORY = ("--mem", "--mem-per-cpu", "--mem-per-gpu")
# sbatch options that take a value (so `--partition gpu` is one option, not two words).
_VALUED = frozenset(
    {"-p", "--partition", "-q", "--qos", "-C", "--constraint", "-N",
     "--nodes", "-n", "--ntasks", "-c", "--cpus-per-task", "--ntasks-per-node", "--signal",
     "--mail-type", "--nice", "-w", "--nodelist", "-x", "--exclude", "--licenses",
     "--gpus-per-node", "--gpus-per-task", "--cpus-per-gpu", "--reservation", "--tmp",
     "--comment", "--wckey", "--time-min", "--gpu-bind", "--mem-bind", "--deadline",
     "--ntasks-per-gpu", "--threads-per-core", "--distribution", "-m", *HOST_MEMORY}
)  # fmt: skip


ELF_MAGIC = b"\x7fELF"  # a compiled program's first four bytes


def script_of(argv: list[str]) -> str | None:
    """The script a command runs when it is one: its first word a regular file (looked up
    from the working directory, not on PATH) that is not a compiled program, else None.

    A compiled program (ELF) is run where it is, never copied: a virtual environment's
    ``bin/python`` finds its environment by its own path (a copy elsewhere is the bare
    interpreter, without the environment's packages), and a program may find its libraries
    or data beside itself."""
    words = argv[1:] if argv[:1] == ["--"] else argv
    if not words or not os.path.isfile(words[0]):
        return None
    try:
        with open(words[0], "rb") as f:
            if f.read(4) == ELF_MAGIC:
                return None
    except OSError:
        pass  # (unreadable: `lines` says so, naming the file)
    return words[0]


def lines(path: str) -> Iterator[tuple[int, str, str]]:
    """``(line number, "BERTH" or "SBATCH", the rest)`` for each directive of the leading
    comment block (at most the first 64 KiB are read: a directive further down is no
    directive for sbatch either)."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError as e:
        raise UsageError(f"cannot read the script {path!r}: {e.strerror}") from None
    text = head.decode("utf-8", "replace")
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or (number == 1 and stripped.startswith("#!")):
            continue
        if not stripped.startswith("#"):
            return
        for prefix in ("BERTH", "SBATCH"):
            tag = "#" + prefix
            if stripped.startswith(tag) and stripped[len(tag) : len(tag) + 1] in (" ", "\t", ""):
                yield number, prefix, stripped[len(tag) :].strip()


def _line_words(prefix: str, text: str, where: str, local: dict[str, str]) -> list[str]:
    try:
        parts = shlex.split(text, comments=True)
    except ValueError as e:
        raise UsageError(f"{where}: {e}") from None
    return parts if prefix == "BERTH" else _sbatch(parts, where, local)


def _owned(name: str, word: str, where: str) -> None:
    """An sbatch option berth sets itself and reads no #SBATCH line of: refused here, so that
    the message names the line (not the --sbatch-arg it would have become)."""
    from berth.backends.sbatch_args import OWN, SHORT  # rare: a script's #SBATCH lines

    own = OWN.get(SHORT.get(name, name))
    if own is not None:
        raise UsageError(f"{where}: berth sets sbatch's {name} itself: write #BERTH {own}")


def _local_refusal(name: str, where: str) -> str:
    """What the local queue says of ``#SBATCH name`` (Slurm takes it)."""
    if name in HOST_MEMORY:
        return (
            f"{where}: {name} is host memory, which the local queue does not manage "
            "(berth's --mem is GPU memory per GPU): remove it, or submit to Slurm"
        )
    taken = sorted({o for o, (b, _) in SBATCH.items() if o.startswith("--")})
    slurm = [o for o in taken if SBATCH[o][0] in SLURM_ONLY]
    return (
        f"{where}: sbatch's {name} has no equal in berth's queue: remove it, or submit to "
        "Slurm (--backend slurm: it goes to sbatch as written); the local queue takes "
        f"#SBATCH {', '.join(o for o in taken if o not in slurm)} (and Slurm alone "
        f"{', '.join(slurm)})"
    )


def _sbatch(parts: list[str], where: str, local: dict[str, str]) -> list[str]:
    """The words of one #SBATCH line as berth options; ``local`` gets the local queue's
    refusal of each option only Slurm takes."""
    out: list[str] = []
    k = 0
    while k < len(parts):
        word = parts[k]
        name, eq, value = word.partition("=")
        if not name.startswith("--") and len(name) > 2 and name.startswith("-"):
            name, value, eq = name[:2], name[2:], "="  # -t10
        if not name.startswith("-"):
            raise UsageError(f"{where}: {word!r} is not an sbatch option")
        if name not in SBATCH:  # (quoted again: --sbatch-arg is split as a shell splits it)
            _owned(name, word, where)
            text = shlex.join([word])
            if name in _VALUED and not eq and k + 1 < len(parts):
                k += 1
                text = shlex.join([word, parts[k]])
            local[text] = _local_refusal(name, where)
            out.append(f"--sbatch-arg={text}")
            k += 1
            continue
        option, valued = SBATCH[name]
        if option in SLURM_ONLY:
            local[option] = _local_refusal(name, where)
        if valued and not eq:
            k += 1
            if k == len(parts):
                raise UsageError(f"{where}: {name} needs a value")
            value = parts[k]
        if not valued:
            out.append(option)
        else:
            out += [option, *_value(name, value, where)]
        k += 1
    return out


def _value(name: str, value: str, where: str) -> list[str]:
    if name == "--gres":
        return _gres(value, where)
    if name == "--gpus-per-node":
        return _gres(f"gpu:{value}", where)
    return [value]


def _gres(value: str, where: str) -> list[str]:
    """``gpu:2`` -> ``2``; ``gpu:a100:2`` -> ``2 --gpu-name a100``."""
    kind, _, rest = value.partition(":")
    if kind != "gpu":
        raise UsageError(f"{where}: --gres={value}: the local queue knows only gpu:N")
    count = rest.rpartition(":")[2] or "1"
    gpu_type = rest.rpartition(":")[0]
    return [count, "--gpu-name", gpu_type] if gpu_type else [count]


def apply(
    parser: argparse.ArgumentParser, rest: list[str], parsed: argparse.Namespace
) -> argparse.Namespace:
    """``parsed`` again with the directives of the script the command runs (if it is one)
    read first, so that the command line wins; the script's path made absolute (and run by
    its ``#!`` interpreter when it is not executable, as sbatch would). Each directive line
    is checked alone first, so an error names its line."""
    path = script_of(list(getattr(parsed, "argv", None) or []))
    if path is None:
        return parsed
    found: list[str] = []
    local: dict[str, str] = {}
    for number, prefix, text in lines(path):
        where = f"{path} line {number}: #{prefix} {text}"
        one = _line_words(prefix, text, where, local)
        _check(parser, one, where)
        found += one
    again = parser.parse_args([*found, *rest]) if found else parsed
    again.sbatch_lines = local
    argv = list(again.argv)
    at = 1 if argv[:1] == ["--"] else 0
    argv[at : at + 1] = _runner(path)
    again.argv = argv
    again.script_file = os.path.abspath(path)  # (run as the copy taken at submit: .snapshot)
    return again


def _runner(path: str) -> list[str]:
    """How to run the script: its absolute path (not looked up on PATH), or, when it is not
    executable, its ``#!`` line's interpreter with the path."""
    full = os.path.abspath(path)
    if os.access(full, os.X_OK):
        return [full]
    with open(full, "rb") as f:
        first = f.readline(4096).decode("utf-8", "replace").strip()
    if not first.startswith("#!") or not first[2:].split():
        raise UsageError(
            f"{path} is not executable and has no #! line naming its interpreter: "
            f"`chmod +x {path}`, add a #! line, or submit `bash {path}`"
        )
    return [*first[2:].split(), full]


def _check(parser: argparse.ArgumentParser, one: list[str], where: str) -> None:
    """Parse one line's words alone, turning argparse's exit into an error naming the line."""
    import argparse  # (loaded already: the parser is argparse's)

    def refuse(message: str) -> None:
        raise UsageError(f"{where}: {message}")

    saved = parser.error
    parser.error = refuse  # type: ignore[method-assign,assignment]
    try:
        ns, extra = parser.parse_known_args(one)
    except argparse.ArgumentError as e:
        raise UsageError(f"{where}: {e}") from None
    finally:
        parser.error = saved  # type: ignore[method-assign]
    stray = extra + list(getattr(ns, "argv", None) or [])
    if stray:
        raise UsageError(
            f"{where}: {' '.join(stray)!r} is not a berth submit option; a directive holds "
            "options only (the command is the script itself)"
        )
