"""Which of the ledger's claims the enforcer takes as granted (issue 41.1: a claim file made by
hand, skipping the ledger's check, on a GPU others hold, makes its holder's processes nobody's).

Each poll the living claims of each GPU, the daemon's own jobs' included, are judged by
:func:`berth.claims.grant.stand` in the order their files were placed (ctime: the earliest
this enforcer saw of each file, and which poll first saw it). A claim not granted on one of
its GPUs is not granted at all (a claim is all its GPUs or none, as the ledger makes them):
it holds nothing in the enforcer's eyes, and its processes are judged by NVML alone. The
daemon's own jobs' claims are ``proper`` (the daemon made and checked them itself).
"""

from __future__ import annotations

from berth.claims.grant import Placed, stand

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping, Sequence
    from typing import Any

    from berth.claims.state import ClaimInfo
    from berth.daemon.engine.enforce_proof import Proven
    from berth.devices.model import GpuSnapshot

Ident = tuple[int, int]  # (device, inode) of a claim file


class Grants:
    def __init__(self) -> None:
        self._first: dict[Ident, tuple[int, int]] = {}  # file -> (earliest ctime, poll)
        self._poll = 0
        self._refused: dict[str, str] = {}  # claim key -> why it is not granted (logged)

    def judge(
        self,
        claims: Sequence[ClaimInfo],
        keys: Mapping[str, str],
        proper: Collection[str],
        proven: Iterable[Proven],
        gpus: Mapping[str, tuple[int, int | None]],
    ) -> dict[str, str]:
        """Claim key -> why it is not granted ("claim X on GPU 1 placed after job 12's
        exclusive claim: not granted"), for each claim not granted on some GPU.

        ``keys``: each file's path (or its lease) -> its key ("job 12" for the daemon's own,
        else "claim <lease>"; claim_keys.py);
        ``proper``: the keys of the daemon's own; ``proven``: this poll's proven holders
        (a claim nests in the others its holder holds); ``gpus``: uuid -> (index, memory)."""
        self._poll += 1
        first: dict[Ident, tuple[int, int]] = {}
        within: dict[str, set[str]] = {}
        for p in proven:
            for k in p.keys:  # (all of one uid: a process is proven only on its own files)
                within.setdefault(k, set()).update(x for x in p.keys if x != k)
        by_gpu: dict[str, list[Placed]] = {}
        for c in claims:
            known = self._first.get(c.ident)
            placed, poll = (min(known[0], c.placed), known[1]) if known else (c.placed, self._poll)
            first[c.ident] = (placed, poll)
            key = keys.get(c.path) or keys.get(c.lease, f"claim {c.lease}")
            by_gpu.setdefault(c.uuid, []).append(
                Placed(key, placed, c.share, c.memory, poll, key in proper,
                       frozenset(within.get(key, ())))
            )  # fmt: skip
        self._first = first  # (files gone are forgotten: bounded by the scan)
        out: dict[str, str] = {}
        for uuid, placed_ in sorted(by_gpu.items()):
            index, total = gpus.get(uuid, (None, None))
            where = f"GPU {index}" if index is not None else f"GPU {uuid}"
            for key, why in stand(placed_, total).items():
                if why is not None and key not in proper:
                    text = f"{key} on {where} {why}: not granted"
                    out[key] = f"{out[key]}; {text}" if key in out else text
        return out

    def news(
        self,
        refused: Mapping[str, str],
        claims: Mapping[str, Sequence[ClaimInfo]],
        by_uuid: Mapping[str, GpuSnapshot],
    ) -> list[dict[str, Any]]:
        """The audit log's lines for the claims found not granted since the last poll (or
        for a new reason); what is granted now, or gone, is forgotten."""
        out: list[dict[str, Any]] = []
        for key, why in refused.items():
            if self._refused.get(key) == why:
                continue
            files = claims[key]
            gpus = sorted({s.index for c in files if (s := by_uuid.get(c.uuid)) is not None})
            user = files[0].user or str(files[0].uid)
            out.append(
                {"action": "refuse", "class": "ungranted", "holder": key, "user": user,
                 "uid": files[0].uid, "gpus": gpus, "reason": why}
            )  # fmt: skip
        self._refused = dict(refused)
        return out
