"""A stand-in for torch in berth's tests (torch is not installed here): just enough of
``torch.device`` and ``torch.cuda`` for GPU Scheduler's README examples, recording what was set."""

from __future__ import annotations


class _Cuda:
    def __init__(self) -> None:
        self.initialized = False
        self.current = 0
        self.calls: list[int] = []

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self.initialized

    def set_device(self, index: object) -> None:
        self.initialized = True
        self.current = int(str(index).rsplit(":", 1)[-1])
        self.calls.append(self.current)

    def current_device(self) -> int:
        return self.current


cuda = _Cuda()


class device:  # torch's name
    def __init__(self, spec: str) -> None:
        kind, _, index = spec.partition(":")
        self.type = kind
        self.index = int(index) if index else cuda.current_device()

    def __repr__(self) -> str:
        return f"device(type={self.type!r}, index={self.index})"
