"""What berth reads of a Slurm cluster's configuration (``scontrol show config``, one call per
process, :meth:`berth.backends.slurm.Slurm.config`), and the words of a login node where no
cluster is configured at all. Pure: the text in, berth's terms out.

- ``ClusterName`` keys berth's records, scripts and default logs (``<log dir>/<cluster>/``):
  job 1 of cluster A and job 1 of cluster B are two jobs (docs/slurm.md).
- ``MaxArraySize``: an array's highest index must be below it (the real submit's refusal,
  said before sbatch, on a dry run too).
- ``AccountingStorageType``: whether sacct can be asked.
"""

from __future__ import annotations

import re

from berth.backends.base import SubmitRefused

TYPE_CHECKING = False
if TYPE_CHECKING:
    from berth.backends.base import ArraySpec

# What Slurm's commands say when they find no slurm.conf, no SLURM_CONF and no DNS SRV
# record of a configless controller (Slurm 22.05 to 24.x).
NO_CONFIG = (
    "Could not establish a configuration source",
    "fetch_config: DNS SRV lookup failed",
    "ClusterName needs to be specified",
    "Unable to process configuration file",
)

NO_CLUSTER = (
    "no Slurm cluster is configured here ({why}): run berth on a login node of the cluster, "
    "set SLURM_CONF to its slurm.conf (e.g. SLURM_CONF=/etc/slurm/slurm.conf), or use the "
    "local queue (--backend local)"
)


def no_cluster(stderr: str) -> str | None:
    """The message for a Slurm command that found no cluster configured (None otherwise):
    what to do, with Slurm's first words as the reason."""
    if not any(s in stderr for s in NO_CONFIG):
        return None
    if "DNS SRV" in stderr or "dns_srv" in stderr:
        why = "no slurm.conf (SLURM_CONF unset, none in /etc/slurm) and DNS names no controller"
    else:
        first = next((ln.strip() for ln in stderr.splitlines() if ln.strip()), "")
        why = first.split("error: ", 1)[-1] or "no slurm.conf"
    return NO_CLUSTER.format(why=why)


class Config:
    """The settings berth uses of ``scontrol show config``'s text."""

    __slots__ = ("accounting", "cluster", "max_array_size")

    def __init__(self, text: str) -> None:
        values = dict(re.findall(r"^(\w+)\s*=\s*(.*?)\s*$", text, re.M))
        storage = values.get("AccountingStorageType", "")
        self.accounting = bool(storage) and not storage.endswith("/none")
        name = values.get("ClusterName", "")
        # (a name for a directory: Slurm's names are [A-Za-z0-9_-], this keeps it so)
        self.cluster = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".")
        size = values.get("MaxArraySize", "")
        self.max_array_size = int(size) if size.isdigit() else None

    def check_array(self, array: ArraySpec | None) -> None:
        """Refuse an array whose highest index is not below MaxArraySize (SubmitRefused:
        sbatch's reason and berth's hint, as the real submit says them)."""
        top = self.max_array_size
        if array is None or not array.indices or top is None or max(array.indices) < top:
            return
        highest, text, tasks = max(array.indices), array.text, len(array.indices)
        raise SubmitRefused(
            f"Slurm refused the job: the cluster does not take the array {text} ({tasks} "
            f"tasks): its highest index {highest} must be below MaxArraySize {top} (see "
            "`scontrol show config | grep MaxArraySize`); split it, e.g. a sweep into smaller "
            "grids (sbatch: Invalid job array specification)"
        )
