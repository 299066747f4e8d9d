"""Where the keyboard's focus goes after acting on the page (issue 40.3): after hold, cancel,
a confirmed cancel or signing in, the control that was used is gone (replaced by "release",
or the row has no action left, or "Sign in" is hidden), and focus fell to <body>: a keyboard
user started again from the top. It stays on the row, or goes to the next control. And an
array's task is named 9_1 on the page, its log's title included."""

from __future__ import annotations

from typing import Any

from helpers import wait_until
from pagekit import cell, gate_job, js, open_page, row_state
from selenium.webdriver.common.keys import Keys


def _focused(browser: Any) -> str:
    """What has the focus: its data-key, else its id, else its tag."""
    return str(js(browser, "const a = document.activeElement;"
                  "return (a.dataset && a.dataset.key) || a.id || a.tagName;"))  # fmt: skip


def _press(browser: Any, selector: str, key: str = Keys.ENTER) -> None:
    """Focus ``selector`` and press ``key`` there, as a keyboard user does."""
    wait_until(lambda: js(browser, "const b = document.querySelector(arguments[0]);"
                          "return !!b && !b.disabled", selector),
               timeout=10, message=f"{selector} to be there")  # fmt: skip
    js(browser, "document.querySelector(arguments[0]).focus()", selector)
    browser.switch_to.active_element.send_keys(key)


def test_focus_stays_on_the_row_or_the_next_control_after_each_action(
    web: Any, browser: Any
) -> None:
    web.start(gpus=2)
    running, _ = gate_job(web, "runs", gpus=1)
    first, _ = gate_job(web, "first", gpus=2)
    second, _ = gate_job(web, "second", gpus=2)
    open_page(browser, web.url)
    wait_until(lambda: row_state(browser, running) == "RUNNING", timeout=10, message="running")
    # Sign in with the keyboard: "Sign in" is hidden then; focus goes to "Sign out".
    _press(browser, "#signin-btn")
    wait_until(lambda: js(browser, "return document.getElementById('signin').open"), timeout=5)
    browser.switch_to.active_element.send_keys(web.token, Keys.ENTER)
    wait_until(lambda: "signed in as root" in js(browser, "return document.getElementById('who').innerText"),
               timeout=10, message="signed in")  # fmt: skip
    wait_until(lambda: _focused(browser) == "signout-btn", timeout=5,
               message="focus on Sign out")  # fmt: skip
    # Hold: the button becomes "release" (another button): focus goes to it.
    _press(browser, f"[data-key='act-hold-{first}']")
    wait_until(lambda: js(browser, "return !!document.querySelector(arguments[0])",
                          f"[data-key='act-release-{first}']"), timeout=10, message="held")  # fmt: skip
    wait_until(lambda: _focused(browser) == f"act-release-{first}", timeout=5,
               message="focus on the row's release button")  # fmt: skip
    # Cancel a pending job (no question): the row stays (finished), with no action: the row.
    _press(browser, f"[data-key='act-cancel-{second}']")
    wait_until(lambda: row_state(browser, second) == "CANCELLED", timeout=10, message="cancelled")
    wait_until(lambda: _focused(browser) == f"row-{second}", timeout=5, message="focus on its row")
    # Cancel the running one: asked first; confirmed, focus comes back to its row.
    _press(browser, f"[data-key='act-cancel-{running}']")
    wait_until(lambda: js(browser, "return document.getElementById('confirm').open"), timeout=5)
    assert _focused(browser) == "confirm-no"  # (the safe answer first)
    _press(browser, "#confirm-ok")
    wait_until(lambda: row_state(browser, running) == "CANCELLED", timeout=10, message="cancelled")
    wait_until(lambda: _focused(browser) == f"row-{running}", timeout=5,
               message="focus on the cancelled row")  # fmt: skip
    assert web.daemon.job(first)["state"] == "PENDING" and web.daemon.job(first)["held"]


def test_array_tasks_are_named_9_1_on_the_page_and_in_the_log_title(web: Any, browser: Any) -> None:
    web.start(gpus=2)
    out = web.daemon.berth("submit", "--parsable", "--array", "1-2", "--hold", "--", "true")
    assert out.returncode == 0, out.stderr
    array = int(out.stdout.split(";")[0])
    rows = {
        f"{r['array_job']}_{r['array_task']}": r["id"] for r in web.daemon.call("queue")["jobs"]
    }
    task = rows[f"{array}_2"]
    assert task != array  # (its internal id is another number)
    browser.get(f"{web.url}#token={web.token}")
    wait_until(lambda: row_state(browser, task) == "PENDING", timeout=10, message="the task's row")
    assert cell(browser, task, "id") == f"{array}_2"
    _press(browser, f"[data-key='row-{task}']")
    wait_until(lambda: js(browser, "return document.getElementById('log-title').textContent")
               .startswith(f"job {array}_2 "), timeout=10, message="the log's title")  # fmt: skip
    label = js(browser, "return document.querySelector(arguments[0]).getAttribute('aria-label')",
               f"[data-key='act-release-{task}']")  # fmt: skip
    assert label == f"release job {array}_2"
