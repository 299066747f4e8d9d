"""Tables and plots of simulation results (plots only if matplotlib is importable)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from berth.sim.engine import RunResult

COLUMNS = (
    ("load", "load", "{:.2f}"),
    ("policy", "policy", "{}"),
    ("placement", "placement", "{}"),
    ("jobs", "jobs", "{}"),
    ("jct_mean", "JCT mean h", "h"),
    ("jct_ratio", "xBASE", "{:.2f}"),
    ("jct_median", "JCT p50 h", "h"),
    ("jct_p99", "JCT p99 h", "h"),
    ("wait_mean", "wait mean h", "h"),
    ("wait_p99", "wait p99 h", "h"),
    ("wait_max", "wait max h", "h"),
    ("slowdown_mean", "slowdown", "{:.1f}"),
    ("utilisation", "util", "{:.3f}"),
    ("makespan", "makespan h", "h"),
    ("alloc_ratio_when_queued", "alloc", "{:.3f}"),
    ("fragmentation_when_queued", "frag", "{:.3f}"),
    ("jain", "jain", "{:.3f}"),
    ("jain_service", "jain svc", "{:.3f}"),
    ("wall_s", "wall s", "{:.1f}"),
)


def add_ratios(rows: list[dict[str, Any]]) -> str | None:
    """``jct_ratio``: mean JCT over the first policy's at the same load. Returns its name."""
    base: dict[Any, float] = {}
    name = None
    for r in rows:
        key = r.get("load")
        if key not in base:
            base[key] = r["jct_mean"]
            name = name or f"{r['policy']}"
        r["jct_ratio"] = r["jct_mean"] / base[key] if base[key] else math.nan
    return name


def table(rows: Sequence[dict[str, Any]], base: str | None = None) -> str:
    cols = [c for c in COLUMNS if any(c[0] in r for r in rows)]
    head = [c[1].replace("BASE", base or "base") for c in cols]
    body = []
    for r in rows:
        line = []
        for key, _, fmt in cols:
            v = r.get(key)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                line.append("-")
            elif fmt == "h":
                line.append(f"{v / 3600.0:.2f}")
            else:
                line.append(fmt.format(v))
        body.append(line)
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    out = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
    out += ["  ".join(x.rjust(w) for x, w in zip(line, widths, strict=True)) for line in body]
    return "\n".join(out) + "\n"


def tenant_table(rows: Sequence[dict[str, Any]]) -> str:
    """Per run, each tenant's jobs, GPU-hours, mean wait and normalized service while it
    waited (:mod:`berth.sim.fairness`)."""
    out = []
    for r in rows:
        tenants = r.get("tenants")
        if not tenants:
            continue
        jain = r.get("jain_service")
        out.append(
            f"{r['policy']}" + (f" @{r['load']:.2f}" if r.get("load") is not None else "")
            + (f": Jain over service {jain:.3f}" if jain is not None else "")
        )  # fmt: skip
        out.append(f"  {'tenant':<12} {'jobs':>6} {'GPU-h':>10} {'wait mean h':>12} {'service':>8}")
        for name, t in tenants.items():
            service = "-" if t["service"] is None else f"{t['service']:.2f}"
            out.append(
                f"  {name[:12]:<12} {t['jobs']:>6} {t['gpu_hours']:>10.1f} "
                f"{t['wait_mean'] / 3600:>12.2f} {service:>8}"
            )
    return "".join(line + "\n" for line in out)


def can_plot() -> bool:
    try:
        import matplotlib  # noqa: F401  # optional (gpu-berth[plot])
    except ImportError:
        return False
    return True


def plot(results: Sequence[tuple[str, RunResult]], directory: str) -> list[str]:
    """Queue length and utilisation over time, and the JCT CDF per run, as PNGs in
    ``directory``. Needs matplotlib (``pip install gpu-berth[plot]``)."""
    import matplotlib  # optional (gpu-berth[plot])

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # optional; after use("Agg")

    os.makedirs(directory, exist_ok=True)

    def save(fig: Any, name: str) -> str:
        path = os.path.join(directory, name)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path

    paths = []
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for label, res in results:
        ts = [p[0] / 86400.0 for p in res.timeline]
        ax1.step(ts, [p[1] for p in res.timeline], where="post", label=label, lw=0.8)
        ax2.step(ts, [p[2] / res.capacity for p in res.timeline], where="post", label=label, lw=0.8)
    ax1.set_ylabel("jobs waiting")
    ax2.set_ylabel("GPUs allocated / capacity")
    ax2.set_xlabel("days")
    ax1.legend(fontsize=8)
    paths.append(save(fig, "timeline.png"))
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, res in results:
        jct = sorted(res.end[i] - j.submit for i, j in enumerate(res.jobs))
        n = len(jct)
        ax.plot([max(x, 1.0) / 3600.0 for x in jct], [(k + 1) / n for k in range(n)], label=label)
    ax.set_xscale("log")
    ax.set_xlabel("JCT (hours, log)")
    ax.set_ylabel("fraction of jobs")
    ax.legend(fontsize=8)
    paths.append(save(fig, "jct_cdf.png"))
    return paths
