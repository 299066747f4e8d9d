"""Issue 23.2: who really uses each GPU, as nvitop/gpustat show it: a process outside berth
with its user, pid, memory and command; a job's own GPU memory (NVML's process list); the
free share of a fractional GPU; the drain note on its card; array tasks named as the CLI
names them; a lost GPU said in the header. Photographed at 1400x900 and 400x800."""

from __future__ import annotations

from typing import Any

from helpers import wait_until
from pagekit import card_text, gate_job, js, open_page, shot


def _summary(browser: Any) -> str:
    return str(js(browser, "return document.getElementById('summary').innerText"))


def test_cards_say_who_uses_each_gpu(web: Any, browser: Any, tmp_path: Any) -> None:
    web.start(gpus=4)
    fake = web.daemon.fake
    outside = fake.spawn_workload(visible="3", mem="6G", util=70)
    web.daemon.call("pause", gpus=[2], note="driver upgrade")
    half = web.daemon.submit(*fake.workload_cmd("--mem", "3G", "--util", "40"), name="half-eval",
                             gpus=0.5, time_limit=3600.0)  # fmt: skip
    wait_until(lambda: web.daemon.job(half)["state"] == "RUNNING", timeout=10, message="runs")
    on = web.daemon.job(half)["attempts"][-1]["gpus"][0]
    out = web.daemon.berth("submit", "--array", "0-2", "-g", "1", "-t", "1h", "-J", "sweep",
                           "--", "sleep", "60")  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = web.daemon.call("queue")["jobs"]
    array = next(r["array_job"] for r in rows if r["array_job"] is not None)
    long_name = "a-very-long-job-name-that-does-not-fit-its-cell-" * 2
    gate_job(web, long_name, gpus=1, time_limit=600.0)
    browser.get(f"{web.url}#token={web.token}")
    open_page(browser, web.url)
    card = card_text(browser, 3)
    wait_until(lambda: "pid " + str(outside.pid) in card_text(browser, 3), timeout=10,
               message="the outside process on GPU 3's card")  # fmt: skip
    card = card_text(browser, 3)
    assert "root" in card and "6.0 GiB" in card and "workload" in card, card
    holder = "return [...document.querySelectorAll(`.gpu[data-gpu='${arguments[0]}'] .holders li`)].map(l => l.innerText).join('|')"
    wait_until(lambda: "half-eval (0.5 of it)\troot\t3.0 GiB" in js(browser, holder, on).replace("\n", "\t"),
               timeout=10, message="the job's own GPU memory")  # fmt: skip
    assert "0.5 of it free" in card_text(browser, on)
    assert "drained by root: driver upgrade" in card_text(browser, 2)
    other = 1 - on if on in (0, 1) else 0
    wait_until(lambda: f"{array}_" in card_text(browser, other), timeout=10,
               message="an array task named as the CLI names it")  # fmt: skip
    ids = js(
        browser, "return [...document.querySelectorAll('#queue td.id')].map(c => c.textContent)"
    )
    assert f"{array}_0" in ids and f"{array}_2" in ids, ids
    name = js(
        browser, "return document.querySelector('#queue td.name[title^=\"a-very-long\"]').title"
    )
    assert name == long_name  # cut in its cell, whole on hover/focus
    browser.set_window_size(1400, 900)
    shot(browser, "dashboard.png", tmp_path)
    browser.set_window_size(400, 800)  # (the phone layout: tests/web/test_web_phone.py)
    try:
        js(browser, "document.querySelector('table.queue').scrollIntoView()")
        shot(browser, "dashboard-phone.png", tmp_path)
    finally:
        browser.set_window_size(1400, 1000)
    fake.inject(1, "*", "GPU_IS_LOST")
    wait_until(lambda: "1 lost: GPU 1" in _summary(browser), timeout=10,
               message="the header says a GPU is lost")  # fmt: skip
    assert "lost" in card_text(browser, 1)
    fake.inject(1, "*", None)
