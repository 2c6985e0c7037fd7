"""Media answers for browsers: byte ranges (an audio element seeks with ``Range``) and a small cache of bodies.

A clip is cut and encoded per request (:mod:`evalkit.view.media`); a browser
playing and seeking one asks several times for parts of the same body, so the
last bodies are kept, bounded in bytes (the viewer's memory target is 300 MB).
"""

from __future__ import annotations

import threading


def byte_range(header: str, size: int) -> range | None:
    """The bytes a ``Range: bytes=...`` header asks for (browsers seek in audio with it), of a body of ``size``.

    None: serve the whole body (no header, another unit, several ranges, or a header that does not parse, all of
    which HTTP lets a server answer in full); an empty range: what was asked lies past the end (416).
    """
    unit, sep, spec = header.strip().partition("=")
    if not sep or unit.strip().lower() != "bytes" or "," in spec:
        return None
    start, dash, end = spec.strip().partition("-")
    if not dash or not (start.isdigit() or end.isdigit()) or (start and not start.isdigit()):
        return None
    if end and not end.isdigit():
        return None
    if not start:  # the last N bytes
        n = int(end)
        return range(max(0, size - n), size) if n and size else range(0)
    first = int(start)
    if first >= size:
        return range(0)
    last = min(int(end), size - 1) if end else size - 1
    return range(first, last + 1) if last >= first else None


class MediaCache:
    """The last media answers, so a browser seeking in a clip (one request per seek) does not cut it again."""

    def __init__(self, limit_bytes: int = 32 << 20) -> None:
        self.limit = limit_bytes
        self._items: dict[tuple[str, ...], tuple[bytes, str]] = {}
        self._lock = threading.Lock()

    def get(self, name: tuple[str, ...]) -> tuple[bytes, str] | None:
        with self._lock:
            return self._items.get(name)

    def put(self, name: tuple[str, ...], value: tuple[bytes, str]) -> None:
        if len(value[0]) > self.limit // 4:
            return
        with self._lock:
            self._items[name] = value
            while sum(len(b) for b, _ in self._items.values()) > self.limit:
                self._items.pop(next(iter(self._items)))
