"""The JSON loader for files a user gives evalkit (runspecs): duplicate keys and deep nesting refused.

``json.loads`` keeps the last of two equal keys without a word, and raises
RecursionError (a traceback) on a document nested a thousand levels deep.
This loader refuses both with one line naming the file: a duplicate key with
the line of the object that holds it twice, nesting beyond
:data:`~evalkit.util.yaml_safe.MAX_DEPTH` levels, as YAML files are held to.
The C decoder does the work; only a document with a duplicate key is parsed a
second time, by the pure-Python scanner, to find where that object starts.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError, UserError
from evalkit.util.user_files import read_user_text
from evalkit.util.yaml_safe import MAX_DEPTH, shorten

#: the pure-Python object parser the Python scanner calls (not in typeshed's stubs of json.decoder)
_JSON_OBJECT: Any = getattr(json.decoder, "JSONObject")  # noqa: B009


class _DuplicateKey(ValueError):
    """Raised from the pairs hook: the key, and the position of its object when the slow scanner knows it."""

    def __init__(self, key: str, position: int | None = None) -> None:
        super().__init__(key)
        self.key = key
        self.position = position


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)  # in C: a catalogue has thousands of objects, and a key twice is the rare case
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


def _duplicate_position(text: str) -> _DuplicateKey | None:
    """The first duplicate key of ``text`` with the offset of the ``{`` of its object (pure-Python scan)."""
    decoder = json.JSONDecoder(object_pairs_hook=_no_duplicates)

    def parse_object(s_and_end: tuple[str, int], *args: Any) -> tuple[Any, int]:
        try:
            return _JSON_OBJECT(s_and_end, *args)
        except _DuplicateKey as duplicate:
            if duplicate.position is None:
                duplicate.position = s_and_end[1] - 1
            raise

    decoder.parse_object = parse_object  # type: ignore[attr-defined]
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    try:
        decoder.decode(text)
    except _DuplicateKey as duplicate:
        return duplicate
    except (ValueError, RecursionError):
        return None
    return None


def _depth(value: Any) -> int:
    """How many lists and objects are nested in ``value``, counted level by level (no recursion: no stack to overflow).

    Every runspec is checked, so each level is one comprehension over the level before (a catalogue's scalars are
    most of its values, skipped inside it). ``value`` comes from ``json.loads``: containers are exactly dict and list.
    """
    level = [value] if type(value) is dict or type(value) is list else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            return depth
        level = [
            child
            for node in level
            for child in (node.values() if type(node) is dict else node)
            if type(child) is dict or type(child) is list
        ]
    return depth


def _line_column(text: str, position: int) -> str:
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return f"line {line}, column {column}"


def load_json(text: str, source: str, error: type[UserError] = ConfigError) -> Any:
    """Parse ``text``; bad JSON, a key twice in one object or nesting beyond MAX_DEPTH: ``error`` naming ``source``."""
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as duplicate:
        found = _duplicate_position(text) or duplicate
        where = f" the object at {_line_column(text, found.position)}" if found.position is not None else " an object"
        raise error(
            f"{source}: key {shorten(found.key, 80)!r} given twice in{where}; keep one (JSON readers would silently "
            "use the last)"
        ) from None
    except json.JSONDecodeError as problem:
        raise error(f"{source}: line {problem.lineno}, column {problem.colno}: not valid JSON: {problem.msg}") from None
    except RecursionError:
        raise error(f"{source}: lists and objects nested more than {MAX_DEPTH} levels deep") from None
    if _depth(value) > MAX_DEPTH:
        raise error(f"{source}: lists and objects nested more than {MAX_DEPTH} levels deep")
    return value


def load_json_file(path: str | Path, error: type[UserError] = ConfigError) -> Any:
    """Read ``path`` as UTF-8 and parse it with :func:`load_json`; an unreadable or binary file is ``error``."""
    return load_json(read_user_text(path, error), str(path), error)
