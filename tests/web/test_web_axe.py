"""Issue 23.5: axe-core (WCAG 2 A and AA rules) finds no violation on the signed-in page with
GPUs, running, waiting and finished jobs, in the desktop and the phone layout, and on its
Usage tab (issue 36.4).

axe's script comes from its npm package, fetched at install time (.ci/run: ``npm pack
axe-core``, unpacked in .venv/axe/package/); nothing is fetched while the test runs.
``BERTH_AXE_JS`` names another copy. Missing, the test is skipped, except in CI."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from helpers import wait_until
from pagekit import gate_job, js, open_page, row_state

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AXE = os.environ.get("BERTH_AXE_JS") or os.path.join(REPO, ".venv", "axe", "package", "axe.min.js")

RUN = """
const done = arguments[arguments.length - 1];
axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa']}})
  .then(r => done({passes: r.passes.map(p => p.id), violations: r.violations.map(v => ({id: v.id, help: v.help,
      nodes: v.nodes.slice(0, 5).map(n => n.target.join(' ') + ': ' + n.failureSummary)}))}))
  .catch(e => done({passes: [], violations: [{id: 'axe failed', help: String(e), nodes: []}]}));
"""


def _axe() -> str:
    if not os.path.exists(AXE):
        why = f"no axe-core at {AXE}: `cd .venv && mkdir -p axe && cd axe && npm pack axe-core && tar xzf axe-core-*.tgz`"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; .ci/run should have fetched it")
        pytest.skip(why)
    with open(AXE, encoding="utf-8") as f:
        return f.read()


def test_axe_finds_no_wcag_violation(web: Any, browser: Any) -> None:
    source = _axe()
    web.start(gpus=4)
    web.daemon.call("pause", gpus=[3], note="fan replaced")
    running, _ = gate_job(web, "train", gpus=1, time_limit=3600.0)
    gate_job(web, "half", gpus=0.5, time_limit=600.0)
    waiting, _ = gate_job(web, "big", gpus=4, time_limit=60.0)
    gate_job(web, "kept", gpus=1, hold=True)
    done = web.daemon.submit("true", name="quick", gpus=1)
    web.daemon.wait_done([done])
    browser.get(f"{web.url}#token={web.token}")
    open_page(browser, web.url)
    wait_until(lambda: row_state(browser, waiting) == "PENDING" and row_state(browser, running) == "RUNNING",
               timeout=10, message="the queue on the page")  # fmt: skip
    wait_until(lambda: js(browser, "return !!document.querySelector('[data-act]')"), timeout=10,
               message="signed in: actions shown")  # fmt: skip
    browser.set_script_timeout(60)
    try:
        for width, height in ((1400, 900), (400, 800)):
            browser.set_window_size(width, height)
            js(browser, source)
            found = browser.execute_async_script(RUN)
            violations = found["violations"]
            assert violations == [], f"at {width}px:\n" + json.dumps(violations, indent=1)
            assert {"color-contrast", "button-name", "aria-allowed-attr"} <= set(found["passes"]), (
                found
            )
        # The Usage tab (issue 36.4), shown: its chart, tables and tabs pass too.
        js(browser, "document.getElementById('tab-usage').click()")
        wait_until(lambda: js(browser, "return document.querySelectorAll('#usage-users tr').length") > 0,
                   timeout=10, message="the Usage tab's rows")  # fmt: skip
        found = browser.execute_async_script(RUN)
        assert found["violations"] == [], json.dumps(found["violations"], indent=1)
        js(browser, "document.getElementById('tab-now').click()")
    finally:
        browser.set_window_size(1400, 1000)
    assert js(browser, "return document.querySelectorAll('h1').length") == 1
    js(browser, "document.getElementById('signin').showModal()")  # its input is labelled
    found = browser.execute_async_script(RUN)
    assert found["violations"] == [] and "label" in found["passes"], found
    js(browser, "document.getElementById('signin').close()")
    # (axe sees what a broken page would break: an unlabelled input is a violation)
    js(browser, "document.querySelector('main').append(document.createElement('input'))")
    found = browser.execute_async_script(RUN)
    assert "label" in {v["id"] for v in found["violations"]}
