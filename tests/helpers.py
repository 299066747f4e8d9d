"""Small helpers every test area may import: ``from helpers import wait_until``.

(``tests/`` is on ``sys.path`` because ``tests/conftest.py`` lives there.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    pred: Callable[[], T], timeout: float = 5.0, interval: float = 0.01, message: str = ""
) -> T:
    """Poll ``pred()`` until it returns something truthy; return that value.

    Raises AssertionError (with ``message`` and the last value) after ``timeout`` seconds.
    Use this instead of ``time.sleep`` to wait for something to happen.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {message or pred!r}; last value {value!r}"
            )
        time.sleep(interval)
