"""docs/web.md: "The page takes everything from the daemon as text, never as HTML". A user
names a job, writes its log and runs a process outside berth with markup that would run
script in whoever views the page (an admin signed in, whose token may cancel anyone's job):
every viewer sees the markup as text, and none of it runs."""

from __future__ import annotations

from typing import Any

from helpers import wait_until
from pagekit import card_text, js, row_state

MARK = '<img src=x onerror="window.__pwned=(window.__pwned||0)+1">'


def test_markup_in_names_logs_and_commands_is_shown_as_text(web: Any, browser: Any) -> None:
    web.start(gpus=2)
    daemon = web.daemon
    job = daemon.submit(wrap=f"echo '{MARK}'; sleep 600", name=MARK, gpus=1)
    held = daemon.submit("true", name=f"held {MARK}", hold=True)
    daemon.fake.spawn_workload(visible="1", args=("--record", f"/tmp/{MARK}.jsonl"))
    browser.get(f"{web.url}#token={web.token}")  # (root, signed in: what an attack would want)
    wait_until(lambda: row_state(browser, job) == "RUNNING" and row_state(browser, held),
               timeout=20, message="both jobs on the page")  # fmt: skip
    wait_until(lambda: "onerror" in card_text(browser, 1), timeout=20,
               message="the outside process's command on its card")  # fmt: skip
    js(browser, f"document.querySelector(\"#queue tr[data-job='{job}']\").click()")
    wait_until(lambda: MARK in str(js(browser, "return document.getElementById('log').textContent")),
               timeout=10, message="the log's line, as text")  # fmt: skip
    row = js(browser, "return document.querySelector(`#queue tr[data-job='${arguments[0]}']`)"
             ".textContent", job)  # fmt: skip
    assert "<img" in str(row), row  # (the name, as text)
    assert js(browser, "return window.__pwned === undefined")
    assert js(browser, "return document.querySelectorAll('img[src=\"x\"]').length") == 0
