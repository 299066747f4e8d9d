"""Issue 23.3: the page can be relied on. Rows update in place (focus, selection and scroll
survive a live update), rows and job links work by keyboard, cancelling a running job asks
first (tests/web/test_web_browser.py), while the daemon is down the page says "as of HH:MM",
disables actions and reports a failed click, and without JavaScript it says what it needs."""

from __future__ import annotations

from typing import Any

from helpers import wait_until
from pagekit import gate_job, js, open_page, row_state
from selenium.webdriver.common.keys import Keys


def _active_key(browser: Any) -> str | None:
    key = js(
        browser,
        "const a = document.activeElement; return a && a.dataset ? a.dataset.key || a.tagName : null",
    )
    return str(key) if key else None


def test_focus_and_selection_survive_live_updates_and_keys_work(web: Any, browser: Any) -> None:
    web.start(gpus=2)
    first, _ = gate_job(web, "first", gpus=1)
    browser.get(f"{web.url}#token={web.token}")
    open_page(browser, web.url)
    wait_until(lambda: row_state(browser, first) == "RUNNING", timeout=10, message="running")
    row = browser.find_element("css selector", f"#queue tr[data-job='{first}']")
    row.send_keys(Keys.ENTER)  # (the row takes focus and, by keyboard, shows its log)
    wait_until(lambda: f"job {first}" in js(browser, "return document.getElementById('log-title').innerText"),
               timeout=10, message="Enter on a row follows its log")  # fmt: skip
    assert _active_key(browser) == f"row-{first}"
    # Live updates come (jobs start, end, wait): the focus and the selection stay.
    for k in range(3):
        job, gate = gate_job(web, f"more-{k}", gpus=1)
        wait_until(lambda job=job: row_state(browser, job) in ("RUNNING", "PENDING"), timeout=10,
                   message="a new row")  # fmt: skip
        open(gate, "w").close()
        wait_until(lambda job=job: row_state(browser, job) == "COMPLETED", timeout=10,
                   message="it ended")  # fmt: skip
        assert _active_key(browser) == f"row-{first}", "focus was lost in an update"
    sel = js(
        browser, "return [...document.querySelectorAll('#queue tr.sel')].map(r => r.dataset.job)"
    )
    assert sel == [str(first)]
    # A job link on a GPU card is a button: reachable by Tab, pressed by Enter.
    link = browser.find_element("css selector", f".gpu button.link[data-key$='-job-{first}']")
    assert link.get_attribute("tabindex") in (None, "0")
    js(browser, "document.getElementById('log-title').textContent = ''")
    link.send_keys(Keys.ENTER)
    wait_until(lambda: f"job {first}" in js(browser, "return document.getElementById('log-title').innerText"),
               timeout=10, message="Enter on a job link follows its log")  # fmt: skip


def test_while_the_daemon_is_down_the_page_says_so(web: Any, browser: Any) -> None:
    web.start(gpus=2)
    job, _ = gate_job(web, "survivor", gpus=1)
    browser.get(f"{web.url}#token={web.token}")
    open_page(browser, web.url)
    button = f"#queue tr[data-job='{job}'] button[data-act='cancel']"
    wait_until(lambda: js(browser, f"const b = document.querySelector(\"{button}\"); return b && !b.disabled"),
               timeout=10, message="an enabled cancel button")  # fmt: skip
    web.daemon.stop()
    wait_until(lambda: "as of " in js(browser, "return document.getElementById('live-text').innerText"),
               timeout=10, message="the page says how old what it shows is")  # fmt: skip
    assert js(browser, f'return document.querySelector("{button}").disabled')
    js(browser, "ask('cancel', state.queue.rows[0])")  # (as a click that came just before)
    toast = js(browser, "return document.getElementById('toast').innerText")
    assert "does not answer" in toast
    assert (
        js(browser, "return document.getElementById('toast').getAttribute('aria-live')") == "polite"
    )


def test_without_javascript_it_says_what_it_needs(web: Any) -> None:
    web.start(gpus=1)
    status, _, body = web.get("/")
    assert status == 200
    page = body.decode()
    start, end = page.index("<noscript>"), page.index("</noscript>")
    assert "needs JavaScript" in page[start:end] and "berth queue --start" in page[start:end]
