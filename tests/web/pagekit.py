"""What the dashboard's browser tests share: running script in the page, reading rows and
cards, a job that runs until its gate file appears, opening the page until it is live."""

from __future__ import annotations

import os
from typing import Any

from helpers import wait_until

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "docs")


def js(driver: Any, code: str, *args: Any) -> Any:
    return driver.execute_script(code, *args)


def row_state(driver: Any, job: int) -> str | None:
    found = js(driver, "const r = document.querySelector(`#queue tr[data-job='${arguments[0]}']`);"
               "return r ? r.dataset.state : null;", job)  # fmt: skip
    return str(found) if found else None


def cell(driver: Any, job: int, name: str) -> str:
    return str(js(driver, "const c = document.querySelector(`#queue tr[data-job='${arguments[0]}'] td.${arguments[1]}`);"
                  "return c ? c.textContent : '';", job, name))  # fmt: skip


def card_text(driver: Any, gpu: int) -> str:
    return str(js(driver, "const c = document.querySelector(`.gpu[data-gpu='${arguments[0]}']`);"
                  "return c ? c.innerText : '';", gpu))  # fmt: skip


def gate_job(web: Any, name: str, **job: Any) -> tuple[int, str]:
    """A job that prints a line, then runs until its gate file appears."""
    gate = os.path.join(str(web.daemon.fake.root), f"{name}.go")
    wrap = f"echo started {name}; while [ ! -e {gate} ]; do sleep 0.05; done; echo done {name}"
    return web.daemon.submit(wrap=wrap, name=name, **job), gate


def open_page(browser: Any, url: str) -> None:
    browser.get(url)
    wait_until(lambda: js(browser, "return document.querySelectorAll('.gpu').length") > 0 and
               js(browser, "return document.getElementById('live').classList.contains('on')"),
               timeout=10, message="the page shows GPUs and is live")  # fmt: skip


def shot(browser: Any, name: str, tmp: Any) -> str:
    """Save a screenshot: into docs/ with BERTH_DOCS_SHOTS=1 (to refresh the docs' pictures),
    else next to the test's files."""
    where = DOCS if os.environ.get("BERTH_DOCS_SHOTS") == "1" else str(tmp)
    path = os.path.join(where, name)
    assert browser.save_screenshot(path), path
    return path
