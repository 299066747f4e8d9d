"""Issue 23.4: at 400 px the queue is stacked cards (state, name, user, reason, start
estimate), the filters wrap, the sign-in dialog fits, and the page never scrolls sideways."""

from __future__ import annotations

from typing import Any

from helpers import wait_until
from pagekit import gate_job, js, open_page, row_state


def test_a_phone_gets_cards_and_no_sideways_scroll(web: Any, browser: Any) -> None:
    web.start(gpus=2)
    gate_job(web, "a-training-run-with-a-rather-long-name-indeed", gpus=2, time_limit=3600.0)
    waiting, _ = gate_job(web, "waits-for-both", gpus=2, time_limit=60.0)
    browser.set_window_size(400, 800)
    try:
        open_page(browser, web.url)
        wait_until(lambda: row_state(browser, waiting) == "PENDING", timeout=10, message="pending")
        wait_until(lambda: "(at " in js(browser, f"return document.querySelector(\"#queue tr[data-job='{waiting}'] td.starts\").textContent"),
                   timeout=10, message="an estimate")  # fmt: skip
        width = js(browser, "return document.documentElement.clientWidth")
        assert width <= 400
        assert js(browser, "return document.documentElement.scrollWidth") <= width, (
            "sideways scroll"
        )
        card = js(browser, """
            const tr = document.querySelector(`#queue tr[data-job='${arguments[0]}']`);
            const seen = (c) => { const e = tr.querySelector(c); const r = e.getBoundingClientRect();
                return getComputedStyle(e).display !== 'none' && r.width > 0 && r.right <= innerWidth + 1 ? e.innerText : null; };
            return {display: getComputedStyle(tr).display, head: getComputedStyle(document.querySelector('table.queue thead')).display,
                    state: seen('td.state'), name: seen('td.name'), user: seen('td.user'), why: seen('td.why'), starts: seen('td.starts')};
        """, waiting)  # fmt: skip
        assert card["display"] in ("flex", "grid") and card["head"] == "none", card
        assert card["state"] == "PENDING" and card["name"] == "waits-for-both", card
        assert "root" in card["user"] and card["why"] and "(at " in card["starts"], card
        filters = js(
            browser,
            "const r = document.getElementById('filters').getBoundingClientRect(); return [r.left, r.right]",
        )
        assert filters[0] >= 0 and filters[1] <= width
        js(browser, "document.getElementById('signin-btn').click()")
        box = js(
            browser,
            "const r = document.getElementById('signin').getBoundingClientRect(); return [r.left, r.right]",
        )
        assert box[0] >= 0 and box[1] <= width, box
        js(browser, "document.getElementById('signin').close()")
    finally:
        browser.set_window_size(1400, 1000)
