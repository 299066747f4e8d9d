"""What the engine keeps off: paused GPUs (`berth pause`, `berth admin drain`) with who paused
each and why, and the whole queue (`--paused-after-crash` until `berth resume --all`).

A change is written to the store at once (its own transaction) and then kicks a pass: a paused
GPU gets no new job (its running ones keep running), and the reasons of jobs waiting for it
say who drained it and why (:meth:`Pauses.drained`).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from berth.daemon.engine.resources import Resources
    from berth.daemon.store.store import Store

    Note = tuple[str | None, str | None, float]  # (who paused it, why, since)


class Pauses:
    def __init__(self, store: Store, res: Resources, kick: Callable[[], None]) -> None:
        self._store = store
        self._res = res
        self._kick = kick
        self.gpus: set[str] = set()  # GPU uuids
        self.notes: dict[str, Note] = store.pause_notes()  # uuid -> (who, why, since)
        self.queue = False  # the whole queue: nothing starts

    def pause(self, uuids: Iterable[str], by: str, note: str | None, now: float) -> None:
        """Pause GPUs, recording who and why (the first pause's time stays)."""
        uuids = list(uuids)
        with self._store.tx():
            for u in uuids:
                self._store.set_paused(u, True, by, note)
        for u in uuids:
            old = self.notes.get(u) if u in self.gpus else None
            self.notes[u] = (by, note, now if old is None else old[2])
        self.gpus.update(uuids)
        self._kick()  # (reasons change)

    def resume(self, uuids: Iterable[str], *, queue: bool = False) -> None:
        """Resume GPUs (and with ``queue`` the whole queue)."""
        uuids = list(uuids)
        with self._store.tx():
            for u in uuids:
                self._store.set_paused(u, False)
            if queue:
                self._store.set_meta("queue_paused", "0")
        self.gpus.difference_update(uuids)
        for u in uuids:
            self.notes.pop(u, None)
        if queue:
            self.queue = False
        self._kick()

    def indexes(self) -> set[int]:
        """The paused GPUs' indexes (those this machine has now)."""
        by_uuid = self._res.by_uuid
        return {s.index for u in self.gpus if (s := by_uuid.get(u)) is not None}

    def drained(self) -> str:
        """Who drained the paused GPUs and why, for the reasons of jobs waiting for them
        (``GpuPaused``): "; drained by root: driver upgrade" (per GPU when they differ)."""
        if not self.notes:
            return ""
        notes = {}
        for u in self.gpus:
            by, note, _ = self.notes.get(u, (None, None, 0.0))
            s = self._res.by_uuid.get(u)
            if by is not None and s is not None:
                notes[s.index] = f"drained by {by}" + (f": {note}" if note else "")
        if not notes:
            return ""
        if len(set(notes.values())) == 1 and len(notes) == len(self.gpus):
            return "; " + next(iter(notes.values()))
        return "".join(f"; GPU {i} {text}" for i, text in sorted(notes.items()))
