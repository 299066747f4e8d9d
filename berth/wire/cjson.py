"""The wire's JSON without the ``json`` package: ``json`` imports ``re`` (and with it enum,
functools, collections: ~5 ms of every `berth submit`'s start, issue 21), though the work is
done by its C accelerator, ``_json``. :func:`dumps` and :func:`loads` call that accelerator
as ``json.dumps(obj, separators=(",", ":"))`` and ``json.loads`` do, and give the same bytes
and objects; anything else goes to ``json`` itself: a Python without ``_json``, and every
payload the C scanner does not read whole at once (an error, so its message and its type are
json's own; UTF-16/32; whitespace around the value).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_c: Any = None  # json's C accelerator (None: a Python without it; json's pure Python then)
try:
    import _json

    _c = _json
except ImportError:
    pass

_NAN = float("nan")
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": _NAN}


def _default(o: object) -> object:
    """json.JSONEncoder.default: the same refusal."""
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


class _Context:
    """What the C scanner reads of json.JSONDecoder()."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


_scan: Callable[[str, int], tuple[Any, int]] | None = None
if _c is not None:
    _scan = _c.make_scanner(_Context())


def dumps(obj: object) -> str:
    """``json.dumps(obj, separators=(",", ":"))``."""
    if _c is None or isinstance(obj, str):
        import json  # rare: no C accelerator, or a bare string

        return json.dumps(obj, separators=(",", ":"))
    encode = _c.make_encoder(
        {}, _default, _c.encode_basestring_ascii, None, ":", ",", False, False, True
    )
    return "".join(encode(obj, 0))


def dumps_sorted(obj: object) -> str:
    """``json.dumps(obj, sort_keys=True, separators=(",", ":"))``."""
    if _c is None or isinstance(obj, str):
        import json  # rare: no C accelerator, or a bare string

        return json.dumps(obj, sort_keys=True, separators=(",", ":"))
    encode = _c.make_encoder(
        {}, _default, _c.encode_basestring_ascii, None, ":", ",", True, False, True
    )
    return "".join(encode(obj, 0))


def loads(data: bytes) -> Any:
    """``json.loads(data)``."""
    if _scan is not None and data[:1] == b"{" and data[-1:] == b"}":
        try:
            text = data.decode()  # (what json reads as UTF-8: no NUL in its first bytes)
            obj, end = _scan(text, 0)
        except Exception:
            pass
        else:
            if end == len(text):
                return obj
    import json  # rare: anything the scanner does not read whole (an error, UTF-16...)

    return json.loads(data)
