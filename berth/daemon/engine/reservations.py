"""Admin reservations (`berth admin reserve`, docs/admin.md "Reservations"): what the engine
keeps of them and hands each pass as :class:`berth.core.reservations.Window` records.

A reservation names its GPUs by UUID (the indices it shows are this boot's), its window, its
holders (users, groups, projects), who made it and why. It is written to the store at once (its
own transaction) and kicks a pass; it is read back at start-up, so a restart in the middle of
a window keeps it. A group's members come from the user database (grp and pwd: its listed
members and the users whose primary group it is), read again at most every
:data:`GROUP_TTL` seconds, never from a client. Reservations that have ended are no longer
applied or shown, and are deleted when the next one is made.

GPUs named by count (``-g 2``) are chosen when the reservation is made, once: the lowest
indices that no other reservation overlapping the window holds; a reservation overlapping
another on a GPU is refused, naming the other.
"""

from __future__ import annotations

import grp
import json
import pwd
import time

from berth.core.reservations import Window, gpu_list
from berth.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from berth.daemon.engine.resources import Resources
    from berth.daemon.store.store import Store

GROUP_TTL = 60.0
KEYS = ("uuids", "users", "groups", "projects", "unlimited", "by", "note", "made")


class Reservations:
    def __init__(self, store: Store, res: Resources, kick: Callable[[], None]) -> None:
        self._store = store
        self._res = res
        self._kick = kick
        self.entries: dict[int, dict[str, Any]] = {}
        for rid, start, end, data in store.reservations():
            self.entries[rid] = {**json.loads(data), "id": rid, "start": start, "end": end}
        self._members: dict[str, tuple[float, frozenset[str]]] = {}  # group -> (read at, users)

    def add(self, entry: dict[str, Any], count: int | None, now: float) -> dict[str, Any]:
        """Keep a new reservation (``entry``: start, end, uuids or ``count``, holders, by,
        note); refused (UsageError, nothing kept) if it overlaps another on a GPU."""
        self._drop_ended(now)
        start, end = entry["start"], entry["end"]
        overlapping = [e for e in self.entries.values() if e["start"] < end and start < e["end"]]
        if count is not None:
            taken = {u for e in overlapping for u in e["uuids"]}
            free = [s.uuid for s in sorted(self._res.snapshots, key=lambda s: s.index)
                    if s.uuid not in taken]  # fmt: skip
            if len(free) < count:
                raise UsageError(
                    f"-g {count}: only {len(free)} GPUs are free of other reservations from "
                    f"{when(start)} to {when(end)}"
                    + "".join(f"; {self.describe(e)}" for e in overlapping)
                )
            entry["uuids"] = free[:count]
        for e in overlapping:
            shared = set(e["uuids"]) & set(entry["uuids"])
            if shared:
                raise UsageError(
                    f"{self._gpus(shared)} overlap {self.describe(e)}: choose other GPUs or "
                    f"another time, or `berth admin unreserve {e['id']}` first"
                )
        data = {k: entry[k] for k in KEYS}
        with self._store.tx():
            rid = self._store.add_reservation(start, end, json.dumps(data))
        self.entries[rid] = {**data, "id": rid, "start": start, "end": end}
        self._kick()
        return self.entries[rid]

    def remove(self, rid: int) -> dict[str, Any]:
        entry = self.entries.get(rid)
        if entry is None:
            known = ", ".join(str(i) for i in sorted(self.entries)) or "none"
            raise UsageError(f"no reservation {rid} (reservations: {known})")
        with self._store.tx():
            self._store.remove_reservation(rid)
        del self.entries[rid]
        self._kick()
        return entry

    def windows(self, now: float) -> list[Window]:
        """The reservations not over, as the core's windows (GPUs this machine has now)."""
        out = []
        for e in self.entries.values():
            if e["end"] <= now:
                continue
            by_uuid = self._res.by_uuid
            gpus = tuple(sorted(s.index for u in e["uuids"] if (s := by_uuid.get(u))))
            users = self.holding_users(e, now)
            out.append(Window(e["id"], gpus, e["start"], e["end"], users,
                              frozenset(e["projects"]), holders(e), e["unlimited"]))  # fmt: skip
        return out

    def holding_users(self, e: dict[str, Any], now: float) -> frozenset[str]:
        """The users a reservation holds for: those it names and its groups' members."""
        users = set(e["users"])
        for g in e["groups"]:
            users |= self.members(g, now)
        return frozenset(users)

    def members(self, group: str, now: float) -> frozenset[str]:
        """The users of ``group`` in the user database (read again every GROUP_TTL s)."""
        seen = self._members.get(group)
        if seen is not None and now - seen[0] < GROUP_TTL:
            return seen[1]
        try:
            g = grp.getgrnam(group)
        except KeyError:
            users: frozenset[str] = frozenset()  # (the group is gone: nobody holds it)
        else:
            named = set(g.gr_mem)
            named.update(p.pw_name for p in pwd.getpwall() if p.pw_gid == g.gr_gid)
            users = frozenset(named)
        self._members[group] = (now, users)
        return users

    def view(self, now: float) -> list[dict[str, Any]]:
        """Every reservation not over, for `berth admin reservations`, status, queue and the
        dashboard: its GPUs (indices), window, holders (``members``: the users it holds for,
        groups expanded, as `simulate --what-if` replays it), and whether it is open."""
        out = []
        for e in sorted(self.entries.values(), key=lambda e: (e["start"], e["id"])):
            if e["end"] <= now:
                continue
            out.append({
                "id": e["id"], "gpus": self.indices(e["uuids"]), "uuids": list(e["uuids"]),
                "start": e["start"], "end": e["end"], "users": e["users"],
                "groups": e["groups"], "projects": e["projects"], "holders": holders(e),
                "unlimited": e["unlimited"], "by": e["by"], "note": e["note"],
                "open": e["start"] <= now, "made": e["made"],
                "members": sorted(self.holding_users(e, now)),
            })  # fmt: skip
        return out

    def describe(self, e: dict[str, Any]) -> str:
        """"reservation 3 (GPUs 0,1 for alice, 2026-12-01 14:00 to 16:00)"."""
        return (
            f"reservation {e['id']} ({self._gpus(e['uuids'])} for {holders(e)}, "
            f"{when(e['start'])} to {when(e['end'])})"
        )

    def indices(self, uuids: Iterable[str]) -> list[int]:
        by_uuid = self._res.by_uuid
        return sorted(s.index for u in uuids if (s := by_uuid.get(u)) is not None)

    def _gpus(self, uuids: Iterable[str]) -> str:
        uuids = list(uuids)
        idx = self.indices(uuids)
        return gpu_list(idx) if len(idx) == len(uuids) else "GPUs " + ",".join(uuids)

    def _drop_ended(self, now: float) -> None:
        ended = [rid for rid, e in self.entries.items() if e["end"] <= now]
        if ended:
            with self._store.tx():
                for rid in ended:
                    self._store.remove_reservation(rid)
            for rid in ended:
                del self.entries[rid]


def holders(e: dict[str, Any]) -> str:
    """Who holds a reservation, in words: "alice, group ml, project vision"."""
    groups = [f"group {g}" for g in e["groups"]]
    return ", ".join([*e["users"], *groups, *(f"project {p}" for p in e["projects"])])


def when(t: float) -> str:
    """A time in the server's local time, to the minute (to the second if it has them)."""
    fmt = "%Y-%m-%d %H:%M" if int(t) % 60 == 0 else "%Y-%m-%d %H:%M:%S"
    return time.strftime(fmt, time.localtime(t))
