"""The dashboard in a real headless Chromium, against a daemon over 8 fake GPUs: it shows the
GPUs and jobs, follows a job's start and end without reloading, follows a job's log, and
offers no action (the server refusing one) until the viewer signs in as the job's owner; with
projects configured, a usage line per project."""

from __future__ import annotations

import json
from typing import Any

from helpers import wait_until
from pagekit import card_text, gate_job, js, open_page, row_state


def test_page_shows_gpus_and_follows_a_job_start_and_end_live(web: Any, browser: Any) -> None:
    web.start(gpus=8)
    web.daemon.fake.update(3, util=87, memory_used="40G")
    open_page(browser, web.url)
    assert js(browser, "return document.querySelectorAll('.gpu').length") == 8
    wait_until(lambda: "87%" in card_text(browser, 3), timeout=10, message="GPU 3 at 87%")
    js(browser, "window.__notReloaded = true")
    job, gate = gate_job(web, "follow-me", gpus=1)
    wait_until(lambda: row_state(browser, job) == "RUNNING", timeout=10, message="row RUNNING")
    gpu = web.daemon.job(job)["attempts"][-1]["gpus"][0]
    wait_until(lambda: f"{job} follow-me" in card_text(browser, gpu), timeout=10,
               message="the GPU card names its job")  # fmt: skip
    summary = js(browser, "return document.getElementById('summary').innerText")
    assert "8 GPUs" in summary and "1 running" in summary
    open(gate, "w").close()
    wait_until(lambda: row_state(browser, job) == "COMPLETED", timeout=10, message="COMPLETED")
    wait_until(lambda: "follow-me" not in card_text(browser, gpu), timeout=10,
               message="the GPU is free again on the page")  # fmt: skip
    assert js(browser, "return window.__notReloaded === true"), "the page reloaded"


def test_actions_need_the_owners_token(web: Any, browser: Any) -> None:
    web.start(gpus=8)
    running, _ = gate_job(web, "mine-running", gpus=1)
    held, _ = gate_job(web, "mine-held", gpus=1, hold=True)
    open_page(browser, web.url)
    wait_until(lambda: row_state(browser, running) == "RUNNING", timeout=10, message="running")
    assert js(browser, "return document.querySelectorAll('[data-act]').length") == 0
    # The page's own script cannot act without a token, nor with another user's.
    post = (
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0], {method: 'POST', headers: arguments[1]})"
        ".then(r => r.text().then(t => done([r.status, t])));"
    )
    url = f"/api/jobs/{running}/cancel"
    status, text = browser.execute_async_script(post, url, {})
    assert status == 401 and "berth web-token" in text
    other = {"Authorization": f"Bearer {web.token_for(4242)}"}
    status, text = browser.execute_async_script(post, url, other)
    assert status == 403 and "belongs to root" in json.loads(text)["error"]["message"]
    assert web.daemon.job(running)["state"] == "RUNNING"
    # Signed in as the owner (the link `berth web-token` prints), the buttons appear and work.
    browser.get(f"{web.url}#token={web.token}")
    wait_until(lambda: "signed in as root" in js(browser, "return document.getElementById('who').innerText"),
               timeout=10, message="signed in")  # fmt: skip
    assert "#token" not in browser.current_url  # the token does not stay in the address bar
    # Kept by this tab only: nothing in local storage for a later page at this origin to read.
    assert js(browser, "return localStorage.getItem('berth.token')") is None
    assert js(browser, "return sessionStorage.getItem('berth.token')") == web.token
    sel = "#queue tr[data-job='{}'] button[data-act='{}']"
    enabled = "const b = document.querySelector(arguments[0]); return !!b && !b.disabled"
    wait_until(lambda: js(browser, enabled, sel.format(running, "cancel")), timeout=10,
               message="a cancel button")  # fmt: skip
    js(browser, f'document.querySelector("{sel.format(held, "release")}").click()')
    wait_until(lambda: web.daemon.job(held)["state"] == "RUNNING", timeout=10, message="released")
    js(browser, f'document.querySelector("{sel.format(running, "cancel")}").click()')
    # A running job's cancel asks first; keeping it leaves it running.
    assert js(browser, "return document.getElementById('confirm').open")
    assert f"Cancel job {running}" in js(
        browser, "return document.getElementById('confirm-text').innerText"
    )
    js(browser, "document.getElementById('confirm-no').click()")
    assert web.daemon.job(running)["state"] == "RUNNING"
    js(browser, f'document.querySelector("{sel.format(running, "cancel")}").click()')
    js(browser, "document.getElementById('confirm-ok').click()")
    wait_until(lambda: row_state(browser, running) == "CANCELLED", timeout=10, message="cancelled")


def test_log_panel_follows_the_output(web: Any, browser: Any) -> None:
    web.start(gpus=2)
    job, gate = gate_job(web, "talker", gpus=1)
    browser.get(f"{web.url}#token={web.token}")
    wait_until(lambda: row_state(browser, job) == "RUNNING", timeout=10, message="running")
    js(browser, f"document.querySelector(\"#queue tr[data-job='{job}']\").click()")

    def log() -> str:
        return str(js(browser, "return document.getElementById('log').textContent"))

    wait_until(lambda: "started talker" in log(), timeout=10, message="the log's first line")
    open(gate, "w").close()
    wait_until(lambda: "done talker" in log(), timeout=10, message="the line written later")
    assert log().index("started talker") < log().index("done talker")


def test_projects_have_a_usage_line_each(web: Any, browser: Any) -> None:
    path = web.daemon.fake.root / "config.toml"
    path.write_text("[projects.vision]\nmax_gpus = 2\n[projects.nlp]\n")
    web.daemon.env["BERTH_CONFIG"] = str(path)
    web.start(gpus=4)
    open_page(browser, web.url)
    job, gate = gate_job(web, "charged", gpus=1, project="vision")

    def line() -> str:
        return str(js(browser, "const t = document.getElementById('projects-table');"
                      "return t.hidden ? '' : t.innerText;"))  # fmt: skip

    wait_until(lambda: "vision\t1 of 2\t1\t0" in line(), timeout=10,
               message="vision's line: 1 GPU of its 2, 1 running")  # fmt: skip
    assert "nlp\t0\t0\t0" in line()
    open(gate, "w").close()
    web.daemon.wait_done([job])


def test_no_projects_table_without_projects(web: Any, browser: Any) -> None:
    web.start(gpus=2)
    open_page(browser, web.url)
    assert js(browser, "return document.getElementById('projects-table').hidden") is True
