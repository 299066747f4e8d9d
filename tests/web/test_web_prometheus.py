"""A real Prometheus (Debian's ``prometheus``) scrapes a daemon's /metrics over fake GPUs, and
every query of berth's Grafana dashboard (contrib/grafana/berth-dashboard.json) and of the
stock DCGM dashboard's that berth targets (contrib/grafana/dcgm-dashboard-queries.txt)
returns data through Prometheus's HTTP API.

Prometheus runs on the loopback with a temporary config and storage, scraping every second,
and is stopped after. Missing, the test is skipped, except in CI (.ci/run installs it)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import wait_until
from test_web_dcgm import TELEMETRY, start

from berth.web import metrics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GRAFANA = os.path.join(ROOT, "contrib", "grafana")
# What Grafana puts for its variables: every instance and GPU; windows that hold the test.
VARIABLES = {"$__rate_interval": "1m", "$__range": "5m", "$instance": ".*", "$gpu": ".*"}


def prometheus_binary() -> str:
    found = shutil.which("prometheus") or (
        "/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None
    )
    if found:
        return found
    why = "no prometheus binary: apt-get install prometheus"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}; .ci/run should have installed it")
    pytest.skip(why)


class Prometheus:
    def __init__(self, binary: str, root: str) -> None:
        self.binary, self.root = binary, root
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self, target: str) -> None:
        config = os.path.join(self.root, "prometheus.yml")
        with open(config, "w") as f:
            f.write(
                "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                "scrape_configs:\n"
                f"  - {{job_name: berth, static_configs: [{{targets: ['{target}']}}]}}\n"
            )
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = os.path.join(self.root, "prometheus.log")
        self.proc = subprocess.Popen(
            [self.binary, f"--config.file={config}",
             f"--storage.tsdb.path={os.path.join(self.root, 'data')}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=open(self.log, "wb"),
        )  # fmt: skip

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def api(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                reply = json.load(r)
        except OSError:  # not listening yet, or a bad query (400: its error is the answer)
            return None
        return reply.get("data") if reply.get("status") == "success" else None

    def up(self) -> bool:
        targets = self.api("targets") or {}
        return any(t.get("health") == "up" for t in targets.get("activeTargets", []))

    def query(self, expr: str) -> list[Any]:
        data = self.api("query", query=expr)
        return list(data["result"]) if data else []

    def diagnosis(self) -> str:
        with open(self.log, errors="replace") as f:
            return f.read()[-2000:]


@pytest.fixture
def prometheus(tmp_path: Any) -> Iterator[Prometheus]:
    p = Prometheus(prometheus_binary(), str(tmp_path))
    try:
        yield p
    finally:
        p.stop()


def expand(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def berth_queries() -> list[tuple[str, str]]:
    with open(os.path.join(GRAFANA, "berth-dashboard.json")) as f:
        dash = json.load(f)
    variables = [
        (f"variable {v['name']}", v["definition"])
        for v in dash["templating"]["list"]
        if v["type"] == "query"
    ]
    return variables + [(p["title"], t["expr"]) for p in dash["panels"] for t in p["targets"]]


def dcgm_queries() -> list[tuple[str, str]]:
    with open(os.path.join(GRAFANA, "dcgm-dashboard-queries.txt")) as f:
        lines = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")]
    return [(title, expr) for title, expr in (line.split("\t") for line in lines)]


def answers(prom: Prometheus, expr: str) -> bool:
    """The query returns at least one series with a number (a label_values variable: values)."""
    if expr.startswith("label_values("):
        metric, label = (x.strip() for x in expr[len("label_values(") : -1].split(","))
        return bool(prom.api(f"label/{label}/values", **{"match[]": metric}))
    values = [float(r["value"][1]) for r in prom.query(expand(expr))]
    return any(v == v for v in values)  # (NaN: a quantile of nothing)


def test_prometheus_scrapes_and_every_dashboard_query_returns_data(
    web: Any, prometheus: Prometheus
) -> None:
    start(web, 1, **TELEMETRY)
    prometheus.start(f"127.0.0.1:{web.port}")
    wait_until(
        prometheus.up, timeout=30, message=f"Prometheus scraping berth ({prometheus.diagnosis()!r})"
    )
    # Jobs after the first scrape, so that the counters move inside the dashboards' windows:
    # a holds the GPU, b and c wait; a ends, b runs (a dispatch gap), then c holds the GPU.
    root = str(web.daemon.fake.root)
    gate_a, gate_c = os.path.join(root, "a.go"), os.path.join(root, "c.go")
    a = web.daemon.submit(wrap=f"while [ ! -e {gate_a} ]; do sleep 0.05; done", name="a")
    wait_until(lambda: web.daemon.job(a)["state"] == "RUNNING", timeout=10, message="a runs")
    b = web.daemon.submit(wrap="true", name="b")
    c = web.daemon.submit(wrap=f"while [ ! -e {gate_c} ]; do sleep 0.05; done", name="c")
    open(gate_a, "w").close()
    wait_until(lambda: web.daemon.job(c)["state"] == "RUNNING", timeout=20, message="c runs")
    queries = berth_queries() + dcgm_queries()
    assert len(queries) >= 20

    def unanswered() -> list[tuple[str, str]]:
        return [(title, expr) for title, expr in queries if not answers(prometheus, expr)]

    try:
        wait_until(lambda: not unanswered(), timeout=40, message="every query answered")
    except AssertionError:
        raise AssertionError(f"queries without data: {unanswered()}") from None
    # Every DCGM name berth exports is stored, the GPU's UUID with it.
    names = {
        r["metric"]["__name__"]
        for r in prometheus.query('count by (__name__) ({__name__=~"DCGM_.*"})')
    }
    assert names == {row[0] for row in metrics._DCGM}
    uuid = web.daemon.fake.uuids[0]
    held = f'DCGM_FI_DEV_SM_CLOCK{{UUID="{uuid}", hpc_job="{c}", hpc_user="root"}}'
    wait_until(lambda: prometheus.query(held), timeout=10, message="c's series scraped")
    open(gate_c, "w").close()
    web.daemon.wait_done([a, b, c])
