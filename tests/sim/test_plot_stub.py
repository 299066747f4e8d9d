"""The plot path, with a stand-in for matplotlib (not installed here): every call it makes
must exist and the PNG files are written where asked.

The stand-in models only the calls it promises, with matplotlib's own names and keywords:
``matplotlib.use``, ``pyplot.subplots``/``close``, ``Figure.tight_layout``/``savefig`` and
the ``Axes`` methods below. Anything else (an attribute, a keyword, a value matplotlib would
refuse) raises, so a test fails when berth calls what the stand-in does not model: model it
here first, from matplotlib's documentation.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from berth.sim import report
from berth.sim.engine import simulate
from berth.sim.traces import SimJob
from berth.sim.workload import inventory


class _Axes:
    __slots__ = ("log",)

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def _xy(self, name: str, x: Sequence[float], y: Sequence[float]) -> None:
        if len(x) != len(y):  # as matplotlib: "x and y must have same first dimension"
            raise ValueError(f"{name}: x and y must have same first dimension")
        self.log.append(name)

    def step(
        self,
        x: Sequence[float],
        y: Sequence[float],
        *,
        where: str = "pre",
        label: str | None = None,
        lw: float | None = None,
    ) -> list[object]:
        if where not in ("pre", "post", "mid"):
            raise ValueError(f"step: where={where!r}")
        self._xy("step", x, y)
        return []

    def plot(
        self, x: Sequence[float], y: Sequence[float], *, label: str | None = None
    ) -> list[object]:
        self._xy("plot", x, y)
        return []

    def set_xscale(self, value: str) -> None:
        if value not in ("linear", "log", "symlog", "logit"):
            raise ValueError(f"set_xscale: unknown scale {value!r}")
        self.log.append("set_xscale")

    def set_xlabel(self, xlabel: str) -> None:
        self.log.append("set_xlabel")

    def set_ylabel(self, ylabel: str) -> None:
        self.log.append("set_ylabel")

    def legend(self, *, fontsize: float | None = None) -> None:
        self.log.append("legend")


class _Figure:
    __slots__ = ("log",)

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def tight_layout(self) -> None:
        self.log.append("tight_layout")

    def savefig(self, fname: str, *, dpi: float | None = None) -> None:
        self.log.append("savefig")
        Path(fname).write_bytes(b"\x89PNG")


def _matplotlib(log: list[str]) -> tuple[types.ModuleType, types.ModuleType]:
    """(matplotlib, matplotlib.pyplot): modules that hold only what is modelled."""
    mpl = types.ModuleType("matplotlib")
    plt = types.ModuleType("matplotlib.pyplot")
    backends: list[str] = []

    def use(backend: str, *, force: bool = True) -> None:
        backends.append(backend)

    def subplots(
        nrows: int = 1,
        ncols: int = 1,
        *,
        sharex: bool = False,
        figsize: tuple[float, float] | None = None,
    ) -> tuple[_Figure, Any]:
        assert backends == ["Agg"], "pyplot is used before matplotlib.use('Agg')"
        axes = [_Axes(log) for _ in range(nrows * ncols)]
        return _Figure(log), axes[0] if len(axes) == 1 else tuple(axes)

    def close(fig: _Figure) -> None:
        if not isinstance(fig, _Figure):
            raise TypeError(f"close: not a figure: {fig!r}")
        log.append("close")

    mpl.use = use  # type: ignore[attr-defined]
    plt.subplots = subplots  # type: ignore[attr-defined]
    plt.close = close  # type: ignore[attr-defined]
    mpl.pyplot = plt  # type: ignore[attr-defined]
    return mpl, plt


@pytest.fixture
def plot_log(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The stand-in matplotlib in ``sys.modules``; the calls made to it, by name."""
    log: list[str] = []
    mpl, plt = _matplotlib(log)
    monkeypatch.setitem(sys.modules, "matplotlib", mpl)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", plt)
    return log


def test_plots_are_written(plot_log: list[str], tmp_path: Path) -> None:
    res = simulate([SimJob(i, float(i), 10.0, 1.0) for i in range(1, 20)], inventory("2"))
    assert report.can_plot()
    paths = report.plot([("fifo", res)], str(tmp_path / "out"))
    assert [Path(p).name for p in paths] == ["timeline.png", "jct_cdf.png"]
    assert all(Path(p).exists() for p in paths)
    assert "step" in plot_log and "plot" in plot_log and "set_xscale" in plot_log
    assert plot_log.count("savefig") == plot_log.count("close") == 2


def test_the_stand_in_refuses_what_it_does_not_model(plot_log: list[str]) -> None:
    import matplotlib
    import matplotlib.pyplot as plt

    with pytest.raises(AttributeError):
        plt.figure()
    matplotlib.use("Agg")
    fig, ax = plt.subplots()
    with pytest.raises(AttributeError):
        ax.bar([1], [2])
    with pytest.raises(AttributeError):
        fig.suptitle("x")
    with pytest.raises(AttributeError):
        ax.colour = "red"  # (no attributes are invented either)
    with pytest.raises(TypeError):
        ax.step([1], [2], where="post", color="red")
    with pytest.raises(ValueError):
        ax.plot([1, 2], [3])
    with pytest.raises(ValueError):
        ax.set_xscale("logarithmic")
    assert plot_log == []  # nothing refused was counted as done
