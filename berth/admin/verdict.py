"""One line of `berth admin doctor`: a check's name, its level (ok, warn, fail), what it found
and the fix; the exit status of a list of them (0 all ok, 1 a warning, 2 a failure)."""

from __future__ import annotations

OK, WARN, FAIL = "ok", "warn", "fail"
STATUS = {OK: 0, WARN: 1, FAIL: 2}


class Check:
    __slots__ = ("fix", "level", "name", "said")

    def __init__(self, name: str, level: str, said: str, fix: str = "") -> None:
        self.name = name
        self.level = level
        self.said = said
        self.fix = fix

    def to_dict(self) -> dict[str, str]:
        return {"check": self.name, "level": self.level, "said": self.said, "fix": self.fix}

    def line(self) -> str:
        return f"{self.level:<4}  {self.name}: {self.said}" + (
            f"; fix: {self.fix}" if self.fix else ""
        )


def status(checks: list[Check]) -> int:
    """The exit status: the worst level's."""
    return max((STATUS[c.level] for c in checks), default=0)
