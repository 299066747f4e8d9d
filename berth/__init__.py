"""berth: the GPUs of a shared server as a resource nobody has to fight over.

The public API is imported lazily so that ``import berth`` (and the CLI) start fast:

- :func:`berth.gpus` -- frozen snapshots of the GPUs (NVML, or a declared inventory)
- :func:`berth.select` -- pick GPUs that qualify, with reasons for those that don't
- :func:`berth.acquire` -- claim GPUs for this process (a context manager)
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: keep `typing` out of CLI start-up

__version__ = "0.1.0"

__all__ = ["__version__", "acquire", "gpus", "select"]

if TYPE_CHECKING:
    from typing import Any

    from berth.api import gpus, select
    from berth.api.lease import acquire

_LAZY = {"gpus": "berth.api", "select": "berth.api", "acquire": "berth.api.lease"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'berth' has no attribute {name!r}")
    __import__(module)  # (not importlib: it imports warnings, on every CLI start)
    return getattr(sys.modules[module], name)
