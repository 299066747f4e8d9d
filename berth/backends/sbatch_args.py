"""sbatch options passed through as they are (``--sbatch-arg``, and a submitted script's
``#SBATCH`` lines that berth has no option of its own for), checked against what berth sets
itself: pure (no I/O).

An option berth has its own flag for is refused by name, with that flag (``--time`` -> ``-t``),
so that one thing never says two things; an option berth sets only for some jobs
(``--mem-per-gpu``, ``--mail-type``...) is refused only when this job sets it. Anything else
goes to sbatch as written, which refuses what it does not know.

``--gpus-per-task=N`` goes to sbatch (srun then gives each task N GPUs of its node, where by
default every task of a node sees all of them) when berth's ``-g`` (GPUs per node) is N times
the tasks per node, as Slurm counts them; else it is refused with the ``-g`` to ask.
"""

from __future__ import annotations

import shlex

from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

# sbatch's one-letter options -> their long names (those a pass-through may hold).
SHORT = {
    "-A": "--account", "-a": "--array", "-B": "--extra-node-info", "-b": "--begin",
    "-C": "--constraint", "-c": "--cpus-per-task", "-D": "--chdir", "-d": "--dependency",
    "-e": "--error", "-F": "--nodefile", "-G": "--gpus", "-H": "--hold", "-i": "--input",
    "-J": "--job-name", "-k": "--no-kill", "-L": "--licenses", "-M": "--clusters",
    "-m": "--distribution", "-N": "--nodes", "-n": "--ntasks", "-O": "--overcommit",
    "-o": "--output", "-p": "--partition", "-q": "--qos", "-Q": "--quiet", "-s": "--oversubscribe",
    "-S": "--core-spec", "-t": "--time", "-v": "--verbose", "-W": "--wait", "-w": "--nodelist",
    "-x": "--exclude",
}  # fmt: skip

# Options berth always decides (its own flag, or what berth needs of every job).
OWN = {
    "--gres": "-g", "--gpus": "-g", "--gpus-per-node": "-g",
    "--time": "-t", "--job-name": "-J", "--output": "-o", "--error": "-e", "--chdir": "-D",
    "--dependency": "--dependency", "--kill-on-invalid-dep": "--dependency",
    "--requeue": "--requeue", "--hold": "--hold",
    "--nice": "-p/--priority", "--array": "--array (or berth sweep)",
    "--mail-user": "--mail-user", "--partition": "--partition", "--export": "--export",
    "--parsable": "nothing (berth reads the job id itself)", "--wrap": "--wrap",
    "--wait": "--wait", "--test-only": "berth sweep --dry-run", "--account": "--project",
    "--nodes": "-N", "--ntasks-per-node": "--ntasks-per-node",
}  # fmt: skip


def long_name(word: str) -> str:
    """``--qos=x`` -> ``--qos``; ``-c2`` / ``-c`` -> ``--cpus-per-task``."""
    if word.startswith("--"):
        return word.partition("=")[0]
    return SHORT.get(word[:2], word[:2])


def check(extra: Sequence[str], berth_argv: Sequence[str]) -> list[str]:
    """The words ``extra`` (each ``--sbatch-arg``, split as a shell splits it) for sbatch,
    after berth's own ``berth_argv``; raises :class:`UsageError` naming a conflict."""
    words: list[str] = []
    for arg in extra:
        try:
            words += shlex.split(arg)
        except ValueError as e:
            raise UsageError(f"--sbatch-arg {arg!r}: {e}") from None
    set_here = {long_name(w) for w in berth_argv if w.startswith("-")}
    for word in words:
        if not word.startswith("-"):
            continue  # (an option's value, given as a word of its own)
        name = long_name(word)
        if name in OWN:
            raise UsageError(
                f"--sbatch-arg {word}: berth sets {name} itself; use berth's {OWN[name]}"
            )
        if name == "--no-requeue" and "--requeue" in set_here:
            raise UsageError(f"--sbatch-arg {word}: this job asks --requeue; give one of them")
        if name in set_here:
            raise UsageError(f"--sbatch-arg {word}: berth already sets {name} for this job")
        if name == "--gpus-per-task":
            _per_task(word, words, berth_argv)
    return words


def _per_task(word: str, words: Sequence[str], berth_argv: Sequence[str]) -> None:
    """``--gpus-per-task=N`` (or ``TYPE:N``) against berth's GPUs per node and tasks."""
    at = list(words).index(word)
    value = word.partition("=")[2] or (words[at + 1] if at + 1 < len(words) else "")
    count = value.rpartition(":")[2]
    gres = next((w.removeprefix("--gres=") for w in berth_argv if w.startswith("--gres=")), "")
    tasks = next(
        (w.partition("=")[2] for w in berth_argv if w.startswith("--ntasks-per-node=")), "1"
    )
    if not count.isdigit() or int(count) < 1:
        raise UsageError(f"--sbatch-arg {word}: --gpus-per-task takes a number of GPUs (1, 2)")
    if not gres.startswith("gpu:"):
        raise UsageError(
            f"--sbatch-arg {word}: --gpus-per-task needs whole GPUs (-g N), not {gres}"
        )
    per_node, want = int(gres.rpartition(":")[2]), int(count) * int(tasks)
    if per_node != want:
        raise UsageError(
            f"--sbatch-arg {word}: {tasks} task(s) per node of {count} GPU(s) each are {want} "
            f"GPUs per node: ask -g {want} (berth's -g is GPUs per node; now {per_node})"
        )
