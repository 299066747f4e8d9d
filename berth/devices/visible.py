"""``CUDA_VISIBLE_DEVICES`` read the way the CUDA runtime reads it.

The rules (CUDA programming guide, "CUDA environment variables"):

- unset: every GPU is visible; set but empty: none is;
- otherwise a comma-separated sequence of GPU identifiers, enumerated in the order given:
  an index (``0``), a GPU UUID as ``nvidia-smi -L`` prints it (``GPU-8932f937-d72c-...``) or
  any prefix of one that names exactly one GPU (``GPU-8932f937``), or a MIG device
  (``MIG-GPU-<uuid>/<gpu instance>/<compute instance>``, or ``MIG-<uuid>`` on newer drivers);
- parsing stops at the first invalid identifier: only the devices before it are visible
  (``0,2,-1,1`` shows 0 and 2). Invalid: not a number or UUID, an index out of range, a
  prefix that matches no GPU or several, an empty item, a GPU named a second time.

Whitespace around an item is ignored. A MIG device makes its parent GPU visible (berth
manages whole GPUs); two MIG devices of one GPU do not count as a duplicate. ``MIG-<uuid>``
is looked up with ``mig_parent`` (MIG uuid -> parent GPU uuid); by default NVML is asked
(:func:`berth.devices.nvml.mig_parent`, only when such an item appears and the GPUs came from
NVML). When the lookup answers None, the item is invalid.

Indices count GPUs in CUDA's order: with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` that is PCI bus
order, which is NVML's order. Under CUDA's default ``FASTEST_FIRST`` berth **assumes PCI bus
order too**: that is exact when all GPUs are the same model (CUDA breaks ties by PCI bus id),
but on a machine mixing models CUDA puts the fastest first and berth cannot know CUDA's
ranking, so an index may then name a different GPU than CUDA's. Jobs that berth launches
always get ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, so this only concerns values a user sets by hand;
use UUIDs there to be exact.

The environment berth gives a command on its GPUs is written here too, in one place
(:func:`cuda_env`): `berth run`'s, a lease's and the daemon's jobs'.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from berth.devices.model import GpuSnapshot

__all__ = ["cuda_env", "cuda_index", "cuda_order", "restrict_to_visible", "visible_uuids"]


def cuda_order(gpus: Sequence[GpuSnapshot]) -> list[GpuSnapshot]:
    """All GPUs in CUDA enumeration order (PCI bus order; see the module docstring)."""
    return sorted(gpus, key=lambda g: ((g.pci_bus_id or "").lower(), g.index))


def _match(
    token: str,
    ordered: Sequence[GpuSnapshot],
    mig_parent: Callable[[str], str | None] | None,
) -> GpuSnapshot | None:
    """The GPU one identifier names, or None if the identifier is invalid."""
    if token.isdigit():  # isdigit: no sign, so "-1" is invalid as in CUDA
        i = int(token)
        return ordered[i] if i < len(ordered) else None
    if token.startswith("MIG-"):
        rest = token[4:]
        if rest.startswith("GPU-"):  # MIG-GPU-<uuid>/<gi>/<ci>
            parent, slash, _ = rest.partition("/")
            return _match(parent, ordered, None) if slash else None
        lookup = mig_parent
        if lookup is None:
            if all(g.logical for g in ordered):
                return None  # declared GPUs have no MIG devices
            from berth.devices import nvml  # heavy: pynvml; rare: a MIG device

            lookup = nvml.mig_parent
        parent_uuid = lookup(token)
        if parent_uuid is None:
            return None
        found = [g for g in ordered if g.uuid == parent_uuid]
        return found[0] if found else None
    if token.startswith("GPU-"):
        found = [g for g in ordered if g.uuid.startswith(token)]
        return found[0] if len(found) == 1 else None
    return None


def restrict_to_visible(
    gpus: Sequence[GpuSnapshot],
    value: str | None,
    *,
    mig_parent: Callable[[str], str | None] | None = None,
) -> list[GpuSnapshot]:
    """The GPUs a CUDA process with ``CUDA_VISIBLE_DEVICES=value`` sees, in its device order
    (``cuda:0`` first). ``gpus`` must be all the machine's GPUs; ``value=None`` means unset."""
    ordered = cuda_order(gpus)
    if value is None:
        return ordered
    if not value.strip():
        return []
    visible: list[GpuSnapshot] = []
    for raw in value.split(","):
        token = raw.strip()
        gpu = _match(token, ordered, mig_parent)
        if gpu is None:
            break
        if gpu in visible:
            if token.startswith("MIG-"):
                continue  # another MIG device of the same GPU
            break  # a GPU named twice
        visible.append(gpu)
    return visible


def visible_uuids(
    gpus: Sequence[GpuSnapshot],
    environ: Mapping[str, str],
    *,
    mig_parent: Callable[[str], str | None] | None = None,
) -> list[str]:
    """UUIDs of the GPUs a process with environment ``environ`` sees, in CUDA order."""
    value = environ.get("CUDA_VISIBLE_DEVICES")
    return [g.uuid for g in restrict_to_visible(gpus, value, mig_parent=mig_parent)]


def cuda_index(
    gpu_uuid: str,
    gpus: Sequence[GpuSnapshot],
    environ: Mapping[str, str],
    *,
    mig_parent: Callable[[str], str | None] | None = None,
) -> int | None:
    """The CUDA device index (``cuda:N``) under which a process with environment ``environ``
    sees the GPU ``gpu_uuid``, or None if that GPU is not visible to it.

    ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER`` are honoured; ``FASTEST_FIRST`` (the
    default) is taken as PCI bus order, exact unless the machine mixes GPU models (see the
    module docstring).
    """
    uuids = visible_uuids(gpus, environ, mig_parent=mig_parent)
    return uuids.index(gpu_uuid) if gpu_uuid in uuids else None


def cuda_env(ids: Iterable[int | str]) -> dict[str, str]:
    """The CUDA environment of a command on the GPUs ``ids`` (NVML indices, in the order CUDA
    is to number them: the first is ``cuda:0``), in this one place for `berth run`
    (:mod:`berth.claims.launch`), a lease (:mod:`berth.api.lease`) and the daemon's jobs
    (:mod:`berth.daemon.engine.starts`). No GPU: ``-1`` (an invalid index: CUDA enumerates
    up to the first one, so none); "" would be none to CUDA too, but a shell's ``${VAR:-0,1}``
    and Python's ``if os.environ.get(...)`` read an empty value as unset (all GPUs)."""
    shown = ",".join(str(i) for i in ids)
    return {"CUDA_VISIBLE_DEVICES": shown or "-1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
