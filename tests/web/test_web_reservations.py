"""Admin reservations on the dashboard (issue 24.1): /api/state has them (each GPU's on it,
all of them at the top) and a GPU's card says for whom and until when."""

from __future__ import annotations

from typing import Any

from helpers import wait_until
from pagekit import card_text, open_page


def test_a_reservation_is_on_its_gpus_cards(web: Any, browser: Any) -> None:
    web.start(gpus=2)
    made = web.daemon.berth("admin", "reserve", "--user", "nobody", "--gpu-ids", "1",
                            "--start", "now", "--duration", "2h", "--reason", "demo day")  # fmt: skip
    assert made.returncode == 0, made.stderr
    state = web.json("/api/state")
    assert [r["gpus"] for r in state["reservations"]] == [[1]]
    on = state["gpus"][1]["reserved"]
    assert len(on) == 1 and on[0]["holders"] == "nobody" and on[0]["open"]
    assert state["gpus"][0]["reserved"] == []
    browser.get(f"{web.url}#token={web.token}")
    open_page(browser, web.url)
    wait_until(lambda: "reserved for nobody until" in card_text(browser, 1), timeout=10,
               message="the reservation on GPU 1's card")  # fmt: skip
    assert "(reservation 1): demo day" in card_text(browser, 1)
    assert "reserved" not in card_text(browser, 0)
