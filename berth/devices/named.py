"""What the config's ``[inventory]`` names that the GPUs NVML sees here do not have: an index
past the last GPU, a UUID no GPU has (a prefix, a GPU taken out), a ``manage`` that leaves
berth no GPU. The file alone cannot tell (the same file may serve several hosts; a GPU may
leave for repair): its own contradictions are refused when it is read
(:func:`berth.config.inventory.check`), these are said where the GPUs are read. `berth
status`, `select`, `run` and `berth daemon` print each as a note and go on with the GPUs there
are (what the config names that is not here changes nothing); `berth admin doctor` fails on
them, and the daemon logs them at start.
"""

from __future__ import annotations

from berth.config.inventory import NAMING

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from berth.config import Inventory

    Ids = Sequence[tuple[int, str]]  # (index, uuid) of every GPU NVML sees


def seen() -> list[tuple[int, str]]:
    """(index, uuid) of every GPU NVML sees: two calls a GPU, not a whole read (`berth status`
    reads its own after). Raises NvmlUnavailable without a driver."""
    from berth.devices import nvml  # heavy: pynvml; rare: [inventory] names GPUs

    session = nvml.session()
    out: list[tuple[int, str]] = []
    for index in range(nvml.count()):
        try:
            uuid = session.nvmlDeviceGetUUID(session.nvmlDeviceGetHandleByIndex(index))
        except session.NVMLError:
            uuid = f"UNKNOWN-{index}"  # (as a read names it)
        out.append((index, uuid.decode() if isinstance(uuid, bytes) else str(uuid)))
    return out


def unmatched(inv: Inventory, ids: Ids) -> list[tuple[str, str]]:
    """(what, the fix) for each GPU that ``unavailable``, ``manage`` or ``ban`` names and
    ``ids`` (every GPU NVML sees, by index and uuid) lack: the key, the value and what is
    here; the file to edit. And one where ``manage`` names none of them. [] for a declared
    inventory."""
    if inv.declared is not None:
        return []
    indices = [index for index, _ in ids]
    uuids = {uuid: index for index, uuid in ids}
    here = (f"NVML sees {len(ids)} GPU{'s' if len(ids) != 1 else ''} here"
            + (f" ({_span(indices)})" if ids else ""))  # fmt: skip
    out: list[tuple[str, str]] = []
    for key in NAMING:
        where = inv.given.get(key, "the config")
        fix = f"remove it from {where}, or name a GPU `nvidia-smi -L` lists"
        for ident in map(str, getattr(inv, key) or ()):
            if (ident.isdigit() and int(ident) in indices) or ident in uuids:
                continue
            if ident.isdigit():
                out.append((f"[inventory] {key} names GPU {ident}, but {here}", fix))
            elif len(whole := [u for u in uuids if u.startswith(ident)]) == 1:
                out.append((f"[inventory] {key} names {ident!r}, only the start of GPU "
                            f"{uuids[whole[0]]}'s UUID, which matches no GPU",
                            f"give it whole ({whole[0]!r}) in {where}"))  # fmt: skip
            else:
                out.append(
                    (f"[inventory] {key} names {ident!r}, but no GPU here has that UUID", fix)
                )
    if inv.manage is not None and not any(str(i) in inv.manage or u in inv.manage for i, u in ids):
        out.append((f"[inventory] manage names none of the GPUs here, so berth manages none ({here})",
                    f"name some of them in {inv.given.get('manage', 'the config')}"))  # fmt: skip
    return out


def _span(indices: list[int]) -> str:
    """``0 to 7``, or the indices where some are missing (``0, 1, 3``)."""
    if indices == list(range(len(indices))) and len(indices) > 2:
        return f"0 to {len(indices) - 1}"
    return ", ".join(map(str, indices))
