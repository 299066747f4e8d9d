"""The config's ``[inventory]`` section: which GPUs berth manages. Either declared logical
GPUs (``gpus = 5``, for machines without a driver, tests and demos) or NVML's, restricted by
``manage``, ``ban`` and ``ban_names``; ``unavailable`` leaves GPUs out by index either way.
Declared as :mod:`berth.config`'s keys are (:class:`berth.config.key.Key`).
"""

from __future__ import annotations

from berth.config.key import At, Key, bounded, set_defaults
from berth.units import parse_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from berth.config.key import SoFar


_IDS = "use GPU indices (0, 1) or UUIDs ('GPU-...') as `nvidia-smi -L` shows them"


def _ids(value: list[Any], at: At, cfg: SoFar) -> tuple[str, ...]:
    """manage, ban: GPU indices or whole GPUs' UUIDs, each GPU named once."""
    out: list[str] = []
    for v in value:
        text = str(v).strip() if isinstance(v, (int, str)) and not isinstance(v, bool) else ""
        if not (text.isdigit() or text.startswith(("GPU-", "LOGICAL-"))):
            why = (
                "berth hands out whole GPUs, not MIG instances; " if text.startswith("MIG-") else ""
            )
            raise at.fail(f"[inventory] {at.key} has {v!r}; {why}{_IDS}")
        if text.isdigit():
            text = str(int(text))  # ("01" is GPU 1)
        if text in out:
            raise at.fail(f"[inventory] {at.key} names {_gpu(text)} twice; name each GPU once")
        out.append(text)
    return tuple(out)


def _gpu(ident: str) -> str:
    return f"GPU {ident}" if ident.isdigit() else repr(ident)


def _indices(value: list[Any], at: At, cfg: SoFar) -> tuple[int, ...]:
    ids = _ids(value, at, cfg)
    for i in ids:
        if not i.isdigit():
            raise at.fail(
                f"[inventory] {at.key} has {i!r}; it takes GPU indices (0, 1): "
                "leave a GPU out by UUID with `ban`"
            )
    return tuple(int(i) for i in ids)


def _size(value: str | int, at: At, cfg: SoFar) -> int | None:
    """memory: a GPU's, so at least a GiB (``memory = 80`` is 80 MiB: the unit left out)."""
    try:
        size = parse_size(value if isinstance(value, str) else str(value))
    except ValueError as e:
        raise at.fail(f"[inventory] {at.key}: {e}") from None
    if size < 1 << 30:
        raise at.fail(
            f"[inventory] {at.key} = {value!r} is {size >> 20} MiB (a bare number is MiB), "
            'less than a GPU has: give the unit ("80G")'
        )
    return size


def _names(value: list[Any], at: At, cfg: SoFar) -> tuple[str, ...]:
    """ban_names: parts of GPU names, none empty (an empty one is in every name)."""
    for v in value:
        if not isinstance(v, str) or not v.strip():
            raise at.fail(
                f"[inventory] {at.key} has {v!r}; give parts of GPU names as `berth status` "
                'shows them (["K80"]): an empty one would ban every GPU'
            )
    return tuple(value)


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
        self.given: dict[str, str] = {}  # each key read -> the file it was read from

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


NAMING = ("unavailable", "manage", "ban")  # (the keys that name GPUs, by index or UUID)


def check(inv: Inventory, given: dict[str, str]) -> None:
    """What no one key's check can see (``given``: each key read -> its file): with declared
    GPUs, every GPU named among them; without, no key that only declared GPUs have. Raises
    the ConfigError of the first key at fault, naming its file, value and what to do."""
    inv.given = given
    n = inv.declared
    if n is None:
        for key in ("memory", "name"):
            if key in given:
                raise At(given[key], "inventory", key).fail(
                    f"[inventory] {key} is for declared GPUs (gpus = N); NVML says each real "
                    f"GPU's {key}: remove it, or declare the GPUs with gpus"
                )
        return
    ours = "GPU 0 (LOGICAL-0)" if n == 1 else f"GPUs 0 to {n - 1} (LOGICAL-0 to LOGICAL-{n - 1})"
    for key in NAMING:
        for ident in map(str, getattr(inv, key) or ()):
            index = ident.removeprefix("LOGICAL-")
            if not (index.isdigit() and int(index) < n):
                gpus = given.get("gpus", given[key])  # (a user's file may set it: say which)
                there = f" (in {gpus!r})" if gpus != given[key] else ""
                raise At(given[key], "inventory", key).fail(
                    f"[inventory] {key} names {_gpu(ident)}, but gpus = {n}{there} declares "
                    f"{ours}: name those, or raise gpus"
                )
