"""The config's ``[inventory]`` section: which GPUs berth manages. Either declared logical
GPUs (``gpus = 5``, for machines without a driver, tests and demos) or NVML's, restricted by
``manage``, ``ban`` and ``ban_names``; ``unavailable`` leaves GPUs out by index either way.
Declared as :mod:`berth.config`'s keys are (:class:`berth.config.key.Key`).
"""

from __future__ import annotations

from berth.config.key import Key, bounded, set_defaults
from berth.units import parse_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.config.key import At, SoFar


def _ids(value: list[Any], at: At, cfg: SoFar) -> tuple[str, ...]:
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, str)) or (isinstance(v, int) and v < 0):
            raise at.fail(
                f"[inventory] {at.key} has {v!r}; use GPU indices (0, 1) or UUIDs ('GPU-...')"
            )
        out.append(str(v).strip())
    return tuple(out)


def _indices(value: list[Any], at: At, cfg: SoFar) -> tuple[int, ...]:
    ids = _ids(value, at, cfg)
    if not all(i.isdigit() for i in ids):
        raise at.fail(f"[inventory] {at.key} takes indices")
    return tuple(int(i) for i in ids)


def _size(value: str | int, at: At, cfg: SoFar) -> int | None:
    try:
        return parse_size(value if isinstance(value, str) else str(value))
    except ValueError as e:
        raise at.fail(f"[inventory] {at.key}: {e}") from None


def _names(value: list[Any], at: At, cfg: SoFar) -> tuple[str, ...]:
    return tuple(str(v) for v in value)


class Inventory:
    """What GPUs berth manages: declared logical GPUs, or NVML's restricted by manage/ban."""

    # fmt: off
    declared = Key[int | None]("inventory", (int,), None, bounded(lambda n: 1 <= n <= 1024, "1 to 1024", int), "5", "GPUs 0..4", name="gpus",
        before="Declare logical GPUs instead of reading NVML (machines without a driver, tests, "
        "demos):")
    unavailable = Key[tuple[int, ...]]("inventory", (list,), (), _indices, "[3, 4]", "as scheduler.py's `--init 5 3 4`")
    memory = Key[int | None]("inventory", (str, int), None, _size, '"80G"',
        "memory of each logical GPU, so `--mem` shares can be checked")
    name = Key("inventory", (str,), "logical GPU", None, '"A100"',
        'what the declared GPUs are called (default "logical GPU")')
    manage = Key[tuple[str, ...] | None]("inventory", (list,), None, _ids, "[0, 1, 2, 3]",
        "only these (default: all)",
        before="With NVML: manage only some GPUs, and ban others (by index or UUID) or by name.")
    ban = Key[tuple[str, ...]]("inventory", (list,), (), _ids, '["GPU-8e4c..."]', "never these")
    ban_names = Key[tuple[str, ...]]("inventory", (list,), (), _names, '["K80"]', "never GPUs so named")
    # fmt: on

    def __init__(self, **values: Any) -> None:
        set_defaults(self, values)

    def is_banned(self, index: int, uuid: str, name: str) -> str | None:
        """Why this GPU is not managed by berth (a short reason), or None."""
        if self.manage is not None and str(index) not in self.manage and uuid not in self.manage:
            return "not in inventory.manage"
        if str(index) in self.ban or uuid in self.ban:
            return "banned in config (inventory.ban)"
        if index in self.unavailable:  # (by index, declared GPUs or NVML's alike)
            if self.declared is not None:
                return "declared unavailable (inventory.unavailable)"
            return "unavailable in config (inventory.unavailable)"
        for banned in self.ban_names:
            if banned.lower() in name.lower():
                return f"name matches banned {banned!r} (inventory.ban_names)"
        return None
