"""A GPU lost, and back: what the daemon says when a GPU's reads start or stop failing (NVML
reports it ``healthy=False``, e.g. ``GPU_IS_LOST`` after an XID 79) or NVML stops or starts
listing it. Each change is one line of the daemon's log and one entry of the audit log that
`berth admin log` reads (``{"action": "lost"|"back", "class": "gpu", "gpu", "uuid",
"reason"}``, beside the enforcer's entries); a GPU lost when the daemon starts is said once
then. Fed every poll of :class:`berth.daemon.engine.resources.Resources`.
"""

from __future__ import annotations

import logging
import time

from berth.daemon.engine.audit import append_log

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from berth.devices.model import GpuSnapshot

log = logging.getLogger("berth.daemon")


class GpuHealth:
    """Each GPU's health at the last poll (by NVML index: a lost GPU's UUID may not be
    readable), and the audit log to write changes to (None: the daemon's log only)."""

    def __init__(self, audit_path: str | None = None) -> None:
        self.audit_path = audit_path
        self.known: dict[int, tuple[str, bool]] = {}  # index -> (uuid, healthy)
        self.first = True

    def seen(self, snaps: Sequence[GpuSnapshot]) -> None:
        """Compare this poll's GPUs with the last: say each one lost or back."""
        now = {s.index: s for s in snaps}
        for s in snaps:
            was = self.known.get(s.index)
            uuid = was[0] if was is not None and not s.healthy else s.uuid  # (the last read)
            if not s.healthy and (was is None or was[1]):
                at_start = " (at daemon start)" if self.first else ""
                self._say("lost", s.index, uuid, f"{s.error or 'its reads fail'}{at_start}")
            elif s.healthy and was is not None and not was[1]:
                self._say("back", s.index, uuid, "its reads succeed again")
            elif s.healthy and was is None and not self.first:
                self._say("back", s.index, uuid, "NVML lists it again")
        for index, (uuid, healthy) in self.known.items():
            if index not in now and healthy:
                self._say("lost", index, uuid, "NVML no longer lists it")
        self.known = {
            **{i: (u, False) for i, (u, _) in self.known.items() if i not in now},
            **{
                i: (self.known[i][0] if not s.healthy and i in self.known else s.uuid, s.healthy)
                for i, s in now.items()
            },
        }
        self.first = False

    def _say(self, action: str, index: int, uuid: str, reason: str) -> None:
        if action == "lost":
            log.warning("GPU %d (%s) lost: %s; no job starts on it until it is back",
                        index, uuid, reason)  # fmt: skip
        else:
            log.warning("GPU %d (%s) back: %s", index, uuid, reason)
        if self.audit_path is None:
            return
        append_log(self.audit_path, {"time": time.time(), "action": action, "class": "gpu",
                                     "gpu": index, "uuid": uuid, "reason": reason})  # fmt: skip
