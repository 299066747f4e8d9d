"""Which backend a queue command runs on, and that backend set up from the config: the choice
alone (:mod:`berth.cli.backend` wraps the commands; this module imports none of them).

``--backend``, else the allocation's own daemon when run inside a Slurm allocation whose
``berth daemon --inside-slurm`` is up, else ``$BERTH_BACKEND``, else ``[queue] backend`` in
the config, else ``local`` (the berth daemon).
"""

from __future__ import annotations

import os

from berth import config
from berth.backends import NAMES, get
from berth.errors import UsageError
from berth.wire.paths import allocation_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from berth.backends.base import Backend

ENV = "BERTH_BACKEND"


def chosen(args: argparse.Namespace) -> str:
    name = getattr(args, "backend", None)
    if not name and _allocation_daemon():  # inside an allocation: its own queue, unless told
        name = "local"
    if not name:
        name = os.environ.get(ENV) or config.get().backend
    if name not in NAMES:
        raise UsageError(f"unknown backend {name!r}: use one of {', '.join(NAMES)}")
    return name


def of(args: argparse.Namespace) -> Backend:
    """The backend the command runs on (:func:`chosen`), set up from the config."""
    if chosen(args) == "local":
        return get("local")
    cfg = config.get()
    partition = getattr(args, "partition", None) or cfg.slurm_partition
    return get("slurm", partition=partition, log_dir=cfg.slurm_log_dir)


def _allocation_daemon() -> bool:
    """Whether this runs inside a Slurm allocation whose `berth daemon --inside-slurm` is up."""
    alloc = allocation_dir()
    return alloc is not None and os.path.exists(os.path.join(alloc, "daemon.sock"))
