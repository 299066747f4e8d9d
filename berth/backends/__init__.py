"""Where jobs run: the local berth daemon, or an existing cluster engine (Slurm), behind one
interface (:mod:`berth.backends.base`)."""

from __future__ import annotations

from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.backends.base import Backend

NAMES = ("local", "slurm")


def get(name: str, *, partition: str | None = None, log_dir: str | None = None) -> Backend:
    """The backend called ``name`` ("local" or "slurm")."""
    if name == "local":
        from berth.backends.local import Local  # only the backend chosen

        return Local()
    if name == "slurm":
        from berth.backends.slurm import Slurm  # only the backend chosen

        return Slurm(partition=partition, log_dir=log_dir)
    raise UsageError(f"unknown backend {name!r}: use one of {', '.join(NAMES)}")
