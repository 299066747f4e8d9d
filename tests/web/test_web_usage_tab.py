"""The dashboard's Usage tab (issue 36.4): after known jobs, it shows per user and per project
the GPU-hours `berth report` gives (their sum: the jobs' recorded attempts), a chart of the
days described in words; anonymous viewers see the totals, not others' rows; /metrics keeps
its counters."""

from __future__ import annotations

import json
from typing import Any

from helpers import wait_until
from pagekit import js, open_page


def _held(job: dict[str, Any]) -> float:
    return (
        sum((a["end"] - a["start"]) * len(a["gpus"]) * a["share"] for a in job["attempts"]) / 3600
    )


def _cell(browser: Any, table: str, key: str, name: str) -> str:
    return str(js(browser, "const c = document.querySelector("
                  "`#${arguments[0]} tr[data-key='${arguments[1]}'] td.${arguments[2]}`);"
                  "return c ? c.textContent : '';", table, key, name))  # fmt: skip


def test_the_usage_tab_shows_gpu_hours_per_user_and_project(web: Any, browser: Any) -> None:
    web.start(gpus=2)
    d = web.daemon
    ids = [d.submit("sleep", "0.3", gpus=1), d.submit("sleep", "0.2", gpus=2)]
    d.wait_done(ids)
    hours = sum(_held(d.job(i)) for i in ids)
    user = d.job(ids[0])["user"]

    # Anonymous: the totals, no one's rows.
    status, _, body = web.get("/api/usage")
    anon = json.loads(body)
    assert status == 200 and anon["users"] == [] and anon["scope"] == "anonymous"
    assert abs(anon["totals"]["gpu_hours"] - hours) < 1e-3

    # The page without a token: the totals, and a word that signing in shows one's rows.
    open_page(browser, web.url)
    assert js(browser, "return document.getElementById('panel-usage').hidden") is True
    js(browser, "document.getElementById('tab-usage').click()")
    wait_until(lambda: "sign in" in str(js(browser, "return document.getElementById('usage-note').textContent")),
               timeout=10, message="the anonymous Usage tab")  # fmt: skip
    assert js(browser, "return document.querySelectorAll('#usage-users tr').length") == 0
    # Signed in (an admin): the rows come without leaving the tab.
    js(browser, "setToken(arguments[0]); whoami();", web.token)
    wait_until(lambda: _cell(browser, "usage-users", user, "gpuh") != "", timeout=10,
               message="the Usage tab's row of the user")  # fmt: skip
    assert js(browser, "return document.getElementById('panel-now').hidden") is True
    assert abs(float(_cell(browser, "usage-users", user, "gpuh")) - hours) < 0.01
    assert _cell(browser, "usage-users", user, "jobs") == "2"
    assert _cell(browser, "usage-projects", "-", "jobs") == "2"  # (no project: one row)
    label = str(
        js(browser, "return document.getElementById('usage-chart').getAttribute('aria-label')")
    )
    assert label.startswith("GPU-hours per day over the last 30 days") and "in all" in label
    assert (
        js(browser, "return document.getElementById('tab-usage').getAttribute('aria-selected')")
        == "true"
    )
    # Back to Now with the keyboard's arrow (the tab pattern): the GPUs again.
    js(browser, "document.getElementById('tab-usage').dispatchEvent("
                "new KeyboardEvent('keydown', {key: 'ArrowLeft'}))")  # fmt: skip
    assert js(browser, "return document.getElementById('panel-now').hidden") is False
    status, _, text = web.get("/metrics")
    assert status == 200 and b'berth_jobs_finished_total{outcome="COMPLETED"} 2' in text
