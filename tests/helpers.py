"""Small helpers every test area may import: ``from helpers import wait_until``.

(``tests/`` is on ``sys.path`` because ``tests/conftest.py`` lives there.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

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


class Calls:
    """How many times a method was called since :func:`count_calls` wrapped it (``n``)."""

    def __init__(self) -> None:
        self.n = 0


def count_calls(monkeypatch: Any, owner: type, name: str) -> Calls:
    """Wrap ``owner.name`` (a method) with ``monkeypatch`` so each call is counted; it still
    runs. Undone with the monkeypatch."""
    calls, real = Calls(), getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.n += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def alive(pid: int) -> bool:
    """A process is there and not a zombie (a pid's /proc entry, its state field)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
