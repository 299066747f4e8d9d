"""Issue 23.1: one start estimate, computed by the daemon, the same in `berth queue --start`,
`berth show`, `berth queue --json` and the page's queue; "unknown" while a job ahead has no
time limit, and computed again as the queue changes. The full pending reason stays readable."""

from __future__ import annotations

import json
import time
from typing import Any

from helpers import wait_until
from pagekit import cell, gate_job, js, open_page, row_state


def _cli_start(web: Any, job: int) -> dict[str, Any]:
    out = web.daemon.berth("queue", "--start", "--json")
    assert out.returncode == 0, out.stderr
    return next(p for p in json.loads(out.stdout)["jobs"] if p["id"] == job)


def _at(t: float) -> str:
    return "(at " + time.strftime("%H:%M", time.localtime(t)) + ")"


def test_one_estimate_everywhere_and_unknown_behind_a_job_without_a_limit(
    web: Any, browser: Any
) -> None:
    web.start(gpus=2)
    limited, _ = gate_job(web, "limited", gpus=1, time_limit=5400.0)
    unlimited, _ = gate_job(web, "unlimited", gpus=1)
    wait_until(lambda: web.daemon.job(unlimited)["state"] == "RUNNING", timeout=10,
               message="both run")  # fmt: skip
    waiting, _ = gate_job(web, "needs-both", gpus=2, time_limit=60.0)
    open_page(browser, web.url)
    wait_until(lambda: row_state(browser, waiting) == "PENDING", timeout=10, message="pending")
    # A job ahead has no time limit: nobody can say, and every screen says so.
    wait_until(lambda: cell(browser, waiting, "starts").startswith("unknown"), timeout=10,
               message="the page says unknown")  # fmt: skip
    est = _cli_start(web, waiting)
    assert est["start"] is None and not est["exact"] and "no time limit" in est["note"]
    table = web.daemon.berth("queue", "--start").stdout
    assert "unknown: a job ahead has no time limit" in table
    assert "starts:     unknown" in web.daemon.berth("show", str(waiting)).stdout
    # Without it, the job waits for the limited one's limit: the same time on every screen.
    web.daemon.call("cancel", job_ids=[unlimited])
    wait_until(lambda: "(at " in cell(browser, waiting, "starts"), timeout=10,
               message="the page's estimate follows the queue")  # fmt: skip
    est = _cli_start(web, waiting)
    began = web.daemon.job(limited)["attempts"][0]["start"]
    assert est["exact"] and abs(est["start"] - (began + 5400.0)) < 2
    assert _at(est["start"]) in cell(browser, waiting, "starts")
    assert cell(browser, waiting, "starts").startswith("in <= 1h ")  # (limits: at the latest)
    assert _at(est["start"]) in web.daemon.berth("queue", "--start").stdout
    assert _at(est["start"]) in web.daemon.berth("show", str(waiting)).stdout
    rows = json.loads(web.daemon.berth("queue", "--json").stdout)["jobs"]
    [row] = [r for r in rows if r["id"] == waiting]
    assert row["start_estimate"]["start"] == est["start"]


def test_the_whole_reason_is_readable(web: Any, browser: Any) -> None:
    web.start(gpus=1)
    web.daemon.call(
        "pause", gpus=[0], note="driver upgrade to 550.54 on this machine; back at noon"
    )
    job, _ = gate_job(web, "drained-out", gpus=1, time_limit=60.0)
    open_page(browser, web.url)
    wait_until(lambda: "back at noon" in cell(browser, job, "why"), timeout=10,
               message="the reason names the drain")  # fmt: skip
    for width in (1400, 900):
        browser.set_window_size(width, 900)
        cut = js(browser, "const c = document.querySelector(`#queue tr[data-job='${arguments[0]}'] td.why`);"
                 "return c.scrollWidth > c.clientWidth + 1;", job)  # fmt: skip
        assert not cut, f"the reason is cut at {width}px"
    browser.set_window_size(1400, 1000)


def test_the_queue_line_says_how_good_the_last_weeks_estimates_were(
    web: Any, browser: Any
) -> None:
    """Issue 33.5: a job's first estimate is kept; once it ran, the page says how far off the
    last week's estimates were."""
    web.start(gpus=1)
    first, gate_a = gate_job(web, "first", gpus=1, time_limit=600.0)
    wait_until(lambda: web.daemon.job(first)["state"] == "RUNNING", timeout=10, message="runs")
    second, gate_b = gate_job(web, "second", gpus=1, time_limit=60.0)
    open_page(browser, web.url)
    wait_until(lambda: cell(browser, second, "starts").startswith("in <= "), timeout=10,
               message="the second job is estimated")  # fmt: skip
    assert "start estimates" not in _note(browser)  # (nothing ended yet)
    open(gate_a, "w").close()
    open(gate_b, "w").close()
    wait_until(lambda: web.daemon.job(second)["state"] == "COMPLETED", timeout=15,
               message="both ran")  # fmt: skip

    wait_until(lambda: "start estimates, last 7 days: off by" in _note(browser), timeout=10,
               message="the queue line says how good the estimates were")  # fmt: skip
    assert "100% by their bound, over 1 job" in _note(browser)  # (it started before)


def _note(browser: Any) -> str:
    return str(js(browser, "return document.getElementById('queue-note').textContent"))


def test_a_learned_run_time_is_shown_where_the_estimate_is(web: Any, browser: Any) -> None:
    """Issue 33.1-2: two finished runs of a name make its next job's prediction; `berth show`
    says it, the page's Starts cell has it on hover, and a job behind one of them without a
    limit is estimated from it ("~"), not "unknown"."""
    web.start(gpus=1)
    for _ in range(2):
        done = web.daemon.submit("true", name="quick")
        wait_until(lambda: web.daemon.job(done)["state"] == "COMPLETED", timeout=10,  # noqa: B023
                   message="a quick run ends")  # fmt: skip
    blocker, gate = gate_job(web, "quick")  # (no limit: its name's runs tell)
    wait_until(lambda: web.daemon.job(blocker)["state"] == "RUNNING", timeout=10, message="runs")
    waiting = web.daemon.submit("true", name="quick")
    open_page(browser, web.url)
    wait_until(lambda: cell(browser, waiting, "starts").startswith(("in ~", "now")), timeout=10,
               message="estimated from the learned run time")  # fmt: skip
    shown = web.daemon.berth("show", str(waiting)).stdout
    assert "runs:       typical 0:00, p90 0:00, from 2 runs of quick" in shown, shown
    title = js(browser, f"return document.querySelector(\"#queue tr[data-job='{waiting}'] "
                        "td.starts\").title")  # fmt: skip
    assert title == "runs: typical 0:00, p90 0:00, from 2 runs of quick"
    est = _cli_start(web, waiting)
    assert est["runtime"]["runs"] == 2 and not est["exact"] and est["start"] is not None
    open(gate, "w").close()
