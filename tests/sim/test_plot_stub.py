"""The plot path, with a stand-in for matplotlib (not installed here): every call it makes
must exist and the PNG files are written where asked."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from berth.sim import report
from berth.sim.engine import simulate
from berth.sim.traces import SimJob
from berth.sim.workload import inventory


class _Any:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kw: Any) -> Any:
            self.log.append(name)
            if name == "savefig":
                Path(args[0]).write_bytes(b"\x89PNG")
            return None

        return call


def test_plots_are_written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    log: list[str] = []
    mpl = types.ModuleType("matplotlib")
    mpl.use = lambda *a, **k: None  # type: ignore[attr-defined]
    plt = types.ModuleType("matplotlib.pyplot")
    fig = _Any(log)
    plt.subplots = lambda *a, **k: (fig, (_Any(log), _Any(log)) if a and a[0] == 2 else _Any(log))  # type: ignore[attr-defined]
    plt.close = lambda *a, **k: None  # type: ignore[attr-defined]
    mpl.pyplot = plt  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "matplotlib", mpl)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", plt)
    res = simulate([SimJob(i, float(i), 10.0, 1.0) for i in range(1, 20)], inventory("2"))
    assert report.can_plot()
    paths = report.plot([("fifo", res)], str(tmp_path / "out"))
    assert [Path(p).name for p in paths] == ["timeline.png", "jct_cdf.png"]
    assert all(Path(p).exists() for p in paths)
    assert "step" in log and "plot" in log and "set_xscale" in log
