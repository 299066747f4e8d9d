"""What /metrics adds to the dashboard's GPU entries so that the stock DCGM Grafana dashboard
(grafana.com 12239, dcgm-exporter's own) works without edits, and the per-holder memory.

- :data:`TABLE`: the DCGM exporter's default counters NVML can give (clocks, memory
  temperature, energy, PCIe, NVLink, encoder/decoder, the last XID), with their names, types
  and units, read from the GPU's snapshot (:mod:`berth.devices.telemetry`); plus
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, the utilisation newer dashboards plot: DCGM's profiling
  ratio of time the graphics engine was busy, given here as NVML's utilisation (the share of
  time a kernel ran) / 100. The tensor, SM and DRAM activity ratios need DCGM's profiler and
  are not given.
- :func:`identity`: a GPU's UUID and model name, the last seen at its index where NVML no
  longer gives them (a lost GPU answers no UUID; its card and its series keep the real one,
  so alerts on it fire), remembered from the daemon's first read on (:func:`remember`, when
  the dashboard starts); :func:`with_readings`: the GPU entries with those readings.
- :func:`holder_split`: the GPU's memory in use, or its utilisation, split between its holders
  in proportion to their shares (holders with the same labels merged), so that summing over
  holders gives the GPU's once, never once per holder as summing ``DCGM_FI_DEV_FB_USED`` or
  ``DCGM_FI_DEV_GPU_UTIL`` by ``hpc_user`` does (two ``-g 0.5`` jobs of one user on a GPU at
  80 %: 80, not 160).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from berth.devices.model import GpuSnapshot

TABLE = (  # (name, type, help, snapshot field, divisor)
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "sm_clock", 1),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", "memory_clock", 1),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", "memory_temperature", 1),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
     "Total energy consumption since the driver loaded (in mJ).", "energy", 1),
    ("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "counter",
     "Total number of bytes transmitted through PCIe TX (in KiB).", "pcie_tx", 1024),
    ("DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "counter",
     "Total number of bytes received through PCIe RX (in KiB).", "pcie_rx", 1024),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.",
     "pcie_replays", 1),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", "encoder_utilization", 1),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", "decoder_utilization", 1),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge",
     "Value of the last XID error encountered (0: none since the daemon started).", "last_xid", 1),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter",
     "NVLink data sent and received over all links (in KiB).", "nvlink_total", 1),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge",
     "Ratio of time the GPU was busy (NVML's utilization / 100).", "util", 100),
)  # fmt: skip

HOLDER_MEMORY_HELP = (
    "GPU memory in use (bytes) split between the GPU's jobs and claims by their shares; "
    "summed over holders it is the GPU's memory in use, counted once."
)
HOLDER_UTIL_HELP = (
    "GPU utilization (in %) split between the GPU's jobs and claims by their shares; summed "
    "over holders it is the GPU's utilization, counted once."
)

_FIELDS = tuple(key for _, _, _, key, _ in TABLE if key not in ("nvlink_total", "util"))
_seen: dict[int, tuple[str, str]] = {}  # index -> (UUID, model name) last read there


def identity(s: GpuSnapshot, seen: dict[int, tuple[str, str]] = _seen) -> tuple[str, str]:
    """The GPU's (UUID, model name): NVML's, remembered at its index; for a GPU NVML no
    longer names (lost: ``UNKNOWN-<index>``, "unknown GPU"), the last it named there."""
    if s.uuid.startswith("UNKNOWN-"):
        return seen.get(s.index, (s.uuid, s.name))
    if not s.logical:
        seen[s.index] = (s.uuid, s.name)
    return s.uuid, s.name


def remember(snapshots: Sequence[GpuSnapshot]) -> None:
    """Note each GPU's UUID and name (the dashboard does at its start, from the daemon's
    first read: a GPU lost before the page or /metrics was first asked keeps them)."""
    for s in snapshots:
        identity(s)


def with_readings(
    gpus: list[dict[str, Any]], snapshots: Sequence[GpuSnapshot]
) -> list[dict[str, Any]]:
    """Copies of the GPU entries (:func:`berth.web.view.gpus`: a lost GPU's UUID and name
    already the last seen, :func:`identity`) with the snapshots' telemetry."""
    by_index = {s.index: s for s in snapshots}
    out = []
    for g in gpus:
        g = dict(g)
        s = by_index.get(g["index"])
        if s is not None:
            g.update((key, getattr(s, key)) for key in _FIELDS)
            tx, rx = s.nvlink_tx, s.nvlink_rx
            g["nvlink_total"] = None if tx is None or rx is None else tx + rx
        out.append(g)
    return out


def holder_split(
    gpus: list[dict[str, Any]],
    base: dict[int, list[tuple[str, object]]],
    labels_of: Callable[[dict[str, Any]], list[tuple[str, object]]],
    key: str = "memory_used",
) -> list[tuple[list[tuple[str, object]], float]]:
    """(labels, share of the GPU's ``key``) per holder of each GPU where ``key`` is known:
    the reading split in proportion to the holders' shares (see the module);
    ``labels_of``: a holder's ``hpc_job`` and ``hpc_user`` labels."""
    out: list[tuple[list[tuple[str, object]], float]] = []
    for g in gpus:
        value = g.get(key)
        shares: dict[tuple[str, ...], tuple[list[tuple[str, object]], float]] = {}
        for h in g["holders"]:
            if h["kind"] not in ("job", "claim"):
                continue
            labels = labels_of(h)
            ident = tuple(str(v) for _, v in labels)
            old = shares.get(ident, (labels, 0.0))[1]
            shares[ident] = (labels, old + float(h.get("share") or 1.0))
        total = sum(share for _, share in shares.values())
        if value is None or not total:
            continue
        for labels, share in shares.values():
            out.append((base[g["index"]][:2] + labels, value * share / total))
    return out
