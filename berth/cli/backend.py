"""``--backend local|slurm`` for the queue commands (submit, sweep, queue, show, cancel, logs,
wait).

:func:`wrap` gives ``main`` a command module that parses the command's own options plus
``--backend`` (and, for submit, ``--array``; for submit and sweep, the Slurm-only
``--partition``, ``--mem-per-gpu``), then runs the command on the backend chosen: ``--backend``, else the allocation's own daemon
when run inside a Slurm allocation whose ``berth daemon --inside-slurm`` is up, else
``$BERTH_BACKEND``, else ``[queue] backend`` in the config, else ``local`` (the berth daemon).
queue, show, cancel, logs and wait are one module each, whichever the backend: they act
through the :class:`berth.backends.base.Backend` that
:func:`berth.cli.backend_choice.of` gives. submit and sweep on
Slurm go to :mod:`berth.cli.on_slurm` (what they take differs: --partition, --mem-per-gpu;
-i attaches to a terminal only locally); locally to the command's own module (submit
--file: :mod:`berth.cli.submit_file`).

Job ids are taken as Slurm writes them (``12``, or ``12_3`` for task 3 of array 12), on
either backend: the local daemon has arrays too (:mod:`berth.daemon.engine.admission.arrays`).
"""

from __future__ import annotations

import sys

from berth.cli.backend_choice import chosen
from berth.errors import UsageError
from berth.wire.jobspec import one_machine

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from types import ModuleType

    from berth.cli.submit_options import Option
else:
    ModuleType = type(sys)  # (types.ModuleType, without importing types)

COMMANDS = ("submit", "sweep", "queue", "show", "cancel", "logs", "wait")
ON_EITHER = ("queue", "show", "cancel", "logs", "wait")  # one module, through a Backend

SLURM_HELP = """
On Slurm (--backend slurm, $BERTH_BACKEND=slurm, or [queue] backend = "slurm" in the config)
the same command drives sbatch/squeue/scancel; docs/slurm.md says what maps to what and what
is refused. Slurm only: --partition, --mem-per-gpu (host RAM per GPU), --sbatch-arg
(any sbatch option, passed through; a submitted script's other #SBATCH lines too), -N 2 and
--ntasks-per-node 4 (the command runs under srun on every node, -g GPUs on each).
"""


class Wrapped(ModuleType):
    """A command module with ``--backend`` (what main.py needs: __doc__, add_arguments, run,
    FAST_EXIT)."""

    def __init__(self, name: str, module: ModuleType) -> None:
        super().__init__(module.__name__)
        self.name = name
        self.module = module
        self.FAST_EXIT = getattr(module, "FAST_EXIT", False)
        self.__doc__ = (module.__doc__ or "") + SLURM_HELP

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        self.module.add_arguments(p)  # (job ids parse as `job_id` does: 12, 12_3)
        for flags, kw in options(self.name):
            p.add_argument(*flags, **kw)  # type: ignore[arg-type]

    def quick_args(self, words: list[str]) -> argparse.Namespace | None:
        """submit's common form read without argparse (:mod:`berth.cli.quickargs`), from the
        same declarations the parser is built from; None: build the parser."""
        if self.name != "submit":
            return None
        from berth.cli import quickargs, submit_options  # submit only, not queue, show...

        return quickargs.read([*submit_options.declared(), *options(self.name)], words)

    def run(self, args: argparse.Namespace) -> int:
        if self.name in ON_EITHER:  # (the module asks `of(args)` for its backend)
            result: int = self.module.run(args)
            return result
        if chosen(args) == "slurm":
            from berth.cli import on_slurm  # rare: Slurm

            code: int = getattr(on_slurm, self.name)(args)
            return code
        _local(args)
        if getattr(args, "script_file", None):  # (the script copied: what runs is the copy)
            from berth.jobsfile import snapshot  # rare: a submitted script
            from berth.wire.paths import state_dir  # rare: a submitted script

            snapshot.apply(args, state_dir())
        if self.name == "submit" and args.file:  # (a jobs file: many jobs, one request)
            from berth.cli import submit_file  # rare: --file

            code = submit_file.run(args)
        else:
            code = self.module.run(args)
        return code


def options(name: str) -> list[Option]:
    """The options this module adds to command ``name``, as ``(flags, add_argument's
    keywords)``."""
    out: list[Option] = [(("--backend",), {"help": "local (the berth daemon) or slurm"})]
    if name == "submit":
        out.append((("--array",), {"help": "an array of tasks, e.g. 0-9%%2 (2 at once)"}))
    if name in ("submit", "sweep"):
        out.append((("--partition",), {"help": "Slurm: the partition (sbatch -p)"}))
        out.append((("--mem-per-gpu",), {"help": "Slurm: host RAM per GPU, e.g. 32G"}))
        out.append((("--sbatch-arg",), {
            "action": "append", "metavar": "OPTION",
            "help": "Slurm: an sbatch option passed as it is, e.g. --sbatch-arg=--qos=high "
            "(repeatable; one berth has a flag for is refused, naming the flag)",
        }))  # fmt: skip
    return out


def _local(args: argparse.Namespace) -> None:
    """Refuse what only Slurm takes (a script's #SBATCH line by its line number)."""
    passed = getattr(args, "sbatch_arg", None) or []
    lines = getattr(args, "sbatch_lines", None) or {}
    for arg in passed:
        if arg in lines:
            raise UsageError(lines[arg])
    if passed:
        raise UsageError("--sbatch-arg is for Slurm (--backend slurm)")
    for opt in ("partition", "mem_per_gpu"):
        if getattr(args, opt, None):
            flag = "--" + opt.replace("_", "-")
            raise UsageError(lines.get(flag) or f"{flag} is for Slurm (--backend slurm)")
    why = one_machine(getattr(args, "nodes", 1) or 1, getattr(args, "ntasks_per_node", None))
    if why is not None:  # (the daemon refuses the same, in the same words)
        raise UsageError(why)


def wrap(name: str, module: ModuleType) -> ModuleType:
    """The module main.py runs for command ``name``."""
    return Wrapped(name, module) if name in COMMANDS else module
