"""JSON encoding on the hot path: orjson when installed, the standard library otherwise."""

from __future__ import annotations

import json
from typing import Any

_orjson: Any
try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised only without the optional dependency
    _orjson = None


#: orjson's options, made once (a few lookups less on each of the several encodings a request costs)
_PLAIN = _orjson.OPT_SERIALIZE_NUMPY if _orjson is not None else 0
_SORTED = _PLAIN | _orjson.OPT_SORT_KEYS if _orjson is not None else 0


def dumps_bytes(value: Any, *, sort_keys: bool = False) -> bytes:
    if _orjson is not None:
        return _orjson.dumps(value, option=_SORTED if sort_keys else _PLAIN, default=_default)
    return json.dumps(value, sort_keys=sort_keys, ensure_ascii=False, separators=(",", ":"), default=_default).encode()


def dumps(value: Any, *, sort_keys: bool = False) -> str:
    return dumps_bytes(value, sort_keys=sort_keys).decode()


def loads(data: bytes | str) -> Any:
    if _orjson is not None:
        return _orjson.loads(data)
    return json.loads(data)


def _default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)
