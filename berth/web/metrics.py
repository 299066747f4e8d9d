"""``/metrics``: the GPUs and the queue in the Prometheus text format (version 0.0.4).

Per-GPU readings use the names of NVIDIA's DCGM exporter, so dashboards made for it work
(the stock one, grafana.com 12239, without edits): ``DCGM_FI_DEV_GPU_UTIL`` (%),
``DCGM_FI_DEV_MEM_COPY_UTIL`` (%), ``DCGM_FI_DEV_FB_USED`` and ``DCGM_FI_DEV_FB_FREE`` (MiB),
``DCGM_FI_DEV_POWER_USAGE`` (W), ``DCGM_FI_DEV_GPU_TEMP`` (C), and the rest of the exporter's
default counters NVML gives (:mod:`berth.web.dcgm`: clocks, memory temperature, energy, PCIe,
NVLink, encoder/decoder, the last XID), labelled ``gpu``, ``UUID``, ``device``, ``modelName``
and ``Hostname`` (a lost GPU keeps the UUID it had). Like the exporter's HPC job mapping, a GPU
held by a job or claim carries ``hpc_job`` (the job id as the CLI writes it, ``9_1`` for an
array's task, or ``claim-PID``) and ``hpc_user``, one series per holder (so summing a reading
over holders counts a shared GPU more than once; ``berth_gpu_holder_memory_used_bytes`` and
``berth_gpu_holder_utilization`` split the memory and the utilisation by share instead;
holders with the same labels, e.g. two shares one process holds, are one series,
``berth_gpu_holder`` their summed share); a GPU nobody holds
has one series without them. A reading the driver does not give is left out, not reported as 0.

Everything else is berth's own, prefixed ``berth_``: holders and their shares, paused and
healthy GPUs, the queue by state, wait-time and dispatch-gap histograms, finished jobs by
outcome, GPU time (seconds) and GPUs held per user, and per project (Slurm's accounts,
docs/admin.md "Projects"): GPUs held, jobs by state, decayed usage, quotas and the fair-share
factor (``berth_project_*``).
"""

from __future__ import annotations

import os
import time

from berth.web import dcgm as _dcgm_telemetry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from berth.devices.model import GpuSnapshot
    from berth.web.history import History
    from berth.web.observe import Histogram, Observer

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MIB = 1 << 20

_DCGM = (  # (name, type, help, key in the GPU's entry, divisor)
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "util", 1),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", "mem_util", 1),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", "memory_used", MIB),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", "fb_free", MIB),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "power", 1),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "temp", 1),
    *_dcgm_telemetry.TABLE,
)


def _esc(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: list[tuple[str, object]]) -> str:
    return "{" + ",".join(f'{k}="{_esc(v)}"' for k, v in pairs) + "}" if pairs else ""


def _num(v: float) -> str:
    if v != v:
        return "NaN"
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))


class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, text: str) -> None:
        self.lines.append(f"# HELP {name} {text}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, labels: list[tuple[str, object]], value: float) -> None:
        self.lines.append(f"{name}{_labels(labels)} {_num(value)}")

    def histogram(self, name: str, text: str, h: Histogram) -> None:
        self.family(name, "histogram", text)
        for le, n in h.cumulative():
            self.sample(f"{name}_bucket", [("le", le)], n)
        self.sample(f"{name}_sum", [], round(h.sum, 6))
        self.sample(f"{name}_count", [], h.count)


def _holder_labels(h: dict[str, Any]) -> list[tuple[str, object]]:
    if h["kind"] == "job":  # (an array's task as the CLI names it: 9_1)
        return [("hpc_job", h.get("label") or h["id"]), ("hpc_user", h["user"])]
    pid = h.get("pid")
    return [("hpc_job", f"claim-{pid}" if pid else "claim"), ("hpc_user", h["user"])]


def _holders(g: dict[str, Any]) -> list[tuple[list[tuple[str, object]], str, float]]:
    """The GPU's job and claim holders as series: (labels, kind, share), holders of the
    same labels merged (their shares summed): a series is never given twice."""
    out: dict[tuple[object, ...], tuple[list[tuple[str, object]], str, float]] = {}
    for h in g["holders"]:
        if h["kind"] not in ("job", "claim"):
            continue
        labels = _holder_labels(h)
        key = (h["kind"], *(str(v) for _, v in labels))
        share = float(h.get("share") or 1.0)
        old = out.get(key)
        out[key] = (labels, h["kind"], share + (old[2] if old else 0.0))
    return list(out.values())


_PROJECT = (  # (name, help, key in the project's summary row)
    ("berth_project_gpus_held", "GPUs each project's jobs hold now.", "gpus"),
    ("berth_project_usage_gpu_hours", "Each project's decayed GPU usage (fair share), in "
     "GPU-hours.", "usage_gpu_hours"),
    ("berth_project_fairshare_factor", "Each project's fair-share factor between projects "
     "(2^(-usage/shares): 1 unused, 0.5 its share).", "factor"),
    ("berth_project_shares", "Each project's fair-share weight.", "shares"),
    ("berth_project_max_gpus", "The GPUs each project's jobs may hold at once (projects with "
     "a limit).", "max_gpus"),
    ("berth_project_max_queued", "The jobs each project may have queued or running (projects "
     "with a limit).", "max_queued"),
)  # fmt: skip


def _projects(out: _Out, projects: Sequence[dict[str, Any]]) -> None:
    out.family("berth_project_jobs", "gauge", "Each project's unfinished jobs by state.")
    for p in projects:
        for state, key in (("RUNNING", "running"), ("PENDING", "pending")):
            out.sample("berth_project_jobs", [("project", p["project"]), ("state", state)], p[key])
    for name, text, key in _PROJECT:
        out.family(name, "gauge", text)
        for p in projects:
            if p.get(key) is not None:
                out.sample(name, [("project", p["project"])], round(float(p[key]), 6))


def render(
    gpus: list[dict[str, Any]],
    observer: Observer,
    history: History,
    held: dict[str, float],
    enforce: dict[str, Any] | None = None,
    port_waited: float = 0.0,
    snapshots: Sequence[GpuSnapshot] = (),
    projects: Sequence[dict[str, Any]] = (),
    disk_full: bool = False,
    starts_exhausted: bool = False,
) -> str:
    gpus = _dcgm_telemetry.with_readings(gpus, snapshots)
    out = _Out()
    _per_gpu(out, gpus)
    out.family("berth_queue_jobs", "gauge", "Unfinished jobs by state (HELD: pending and held).")
    for state, n in sorted(observer.queue_counts().items()):
        out.sample("berth_queue_jobs", [("state", state)], n)
    out.histogram(
        "berth_job_wait_seconds",
        "Time from joining the queue to starting, per started attempt.",
        observer.wait,
    )
    out.histogram(
        "berth_dispatch_gap_seconds",
        "Time a freed GPU stayed unused while a job waited, until a job started on it.",
        observer.gap,
    )
    out.family("berth_jobs_finished_total", "counter", "Jobs finished since the daemon started.")
    for outcome in sorted({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", *observer.finished}):
        out.sample(
            "berth_jobs_finished_total", [("outcome", outcome)], observer.finished.get(outcome, 0)
        )
    out.family(
        "berth_user_gpu_seconds_total",
        "counter",
        "GPU time held per user (queue jobs and claims) since the daemon started, in seconds.",
    )
    for user, secs in sorted(history.gpu_seconds.items()):
        out.sample("berth_user_gpu_seconds_total", [("user", user)], round(secs, 3))
    out.family("berth_user_gpus_held", "gauge", "GPUs each user holds now (shares as fractions).")
    for user, amount in sorted(held.items()):
        out.sample("berth_user_gpus_held", [("user", user)], round(amount, 4))
    if projects:
        _projects(out, projects)
    if enforce is not None:
        _enforcement(out, enforce)
    out.family(
        "berth_state_disk_full", "gauge",
        "1 while the state disk is full: queued jobs whose turn comes wait (StateDiskFull).",
    )  # fmt: skip
    out.sample("berth_state_disk_full", [], 1 if disk_full else 0)
    out.family(
        "berth_starts_exhausted", "gauge",
        "1 while starts meet a limit of the system (no file descriptor, memory or process "
        "left): queued jobs whose turn comes wait (SystemLimit).",
    )  # fmt: skip
    out.sample("berth_starts_exhausted", [], 1 if starts_exhausted else 0)
    out.family("berth_daemon_start_time_seconds", "gauge", "When the daemon started (Unix time).")
    out.sample("berth_daemon_start_time_seconds", [], round(observer.started_at, 3))
    out.family(
        "berth_dashboard_port_waited_seconds", "gauge",
        "How long the dashboard waited at start for its port (held by another process).",
    )  # fmt: skip
    out.sample("berth_dashboard_port_waited_seconds", [], round(port_waited, 3))
    out.family("berth_scrape_time_seconds", "gauge", "When this page was made (Unix time).")
    out.sample("berth_scrape_time_seconds", [], round(time.time(), 3))
    return "\n".join(out.lines) + "\n"


def _per_gpu(out: _Out, gpus: list[dict[str, Any]]) -> None:
    """The DCGM exporter's series for each GPU (one per holder's labels), and berth's own."""
    host = os.uname().nodename
    base: dict[int, list[tuple[str, object]]] = {}
    for g in gpus:
        base[g["index"]] = [
            ("gpu", g["index"]), ("UUID", g["uuid"]), ("device", f"nvidia{g['index']}"),
            ("modelName", g["name"]), ("Hostname", host),
        ]  # fmt: skip
    for name, kind, text, key, unit in _DCGM:
        out.family(name, kind, text)
        for g in gpus:
            value = g.get(key)
            if key == "fb_free":
                used, total = g.get("memory_used"), g.get("memory_total")
                value = None if used is None or total is None else max(0, total - used)
            if value is None:
                continue
            v = value / unit
            seen: set[tuple[str, ...]] = set()
            for extra, _, _ in _holders(g) or [([], "", 0.0)]:
                ident = tuple(str(x) for _, x in extra)
                if ident not in seen:  # (a job and a claim of one label set: one series)
                    seen.add(ident)
                    out.sample(name, base[g["index"]] + extra, round(v, 3))
    out.family("berth_gpu_holder", "gauge", "Share of the GPU each job or claim holds.")
    for g in gpus:
        for extra, kind, share in _holders(g):
            labels = base[g["index"]][:2] + extra + [("kind", kind)]
            out.sample("berth_gpu_holder", labels, round(share, 6))
    out.family("berth_gpu_holder_memory_used_bytes", "gauge", _dcgm_telemetry.HOLDER_MEMORY_HELP)
    for labels, used in _dcgm_telemetry.holder_split(gpus, base, _holder_labels):
        out.sample("berth_gpu_holder_memory_used_bytes", labels, round(used))
    out.family("berth_gpu_holder_utilization", "gauge", _dcgm_telemetry.HOLDER_UTIL_HELP)
    for labels, util in _dcgm_telemetry.holder_split(gpus, base, _holder_labels, "util"):
        out.sample("berth_gpu_holder_utilization", labels, round(util, 3))
    out.family("berth_gpu_paused", "gauge", "1 if the GPU is paused for queued jobs.")
    for g in gpus:
        out.sample("berth_gpu_paused", base[g["index"]][:2], 1 if g["paused"] else 0)
    out.family("berth_gpu_healthy", "gauge", "1 if every NVML read of the GPU succeeded.")
    for g in gpus:
        out.sample("berth_gpu_healthy", base[g["index"]][:2], 1 if g["healthy"] else 0)


def _enforcement(out: _Out, view: dict[str, Any]) -> None:
    """Enforcement (issue 25, berth/daemon/engine/enforcer.py): each GPU process that is not
    its holder's, idle holders, and the actions taken."""
    out.family(
        "berth_enforce_process_bytes",
        "gauge",
        "GPU memory of each process outside berth, intruding, or over its holder's memory.",
    )
    for f in view["findings"]:
        labels = [("gpu", f["gpu"]), ("class", f["class"]), ("pid", f["pid"]),
                  ("user", f["user"]), ("holder", f["holder"] or ""), ("victim", f["victim"] or "")]  # fmt: skip
        out.sample("berth_enforce_process_bytes", labels, f["memory"])
    out.family(
        "berth_enforce_process_since_seconds", "gauge", "When each such process was first seen."
    )
    for f in view["findings"]:
        labels = [("gpu", f["gpu"]), ("class", f["class"]), ("pid", f["pid"]), ("user", f["user"])]
        out.sample("berth_enforce_process_since_seconds", labels, round(f["since"], 3))
    out.family("berth_idle_holder_seconds", "gauge", "How long each idle holder's GPUs idled.")
    for i in view["idle"]:
        labels = [("holder", i["holder"]), ("user", i["user"]),
                  ("gpus", ",".join(map(str, i["gpus"])))]  # fmt: skip
        out.sample("berth_idle_holder_seconds", labels, round(i["idle_seconds"], 3))
    out.family("berth_enforce_actions_total", "counter", "Enforcement actions since the start.")
    for action, n in sorted(view["actions"].items()):
        out.sample("berth_enforce_actions_total", [("action", action)], n)
