"""The request log: one JSON line per event, on disk before the next event.

Kill-and-resume tests read it after killing the client (or the server), so each
line goes straight to the kernel with one O_APPEND write: never half a line in a
buffer, never lost with the process. Headers are never written, so tokens and
API keys cannot leak into it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

try:
    import orjson

    def _dumps(obj: Any) -> bytes:
        return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)

except ImportError:  # pragma: no cover - orjson is an optional speed-up

    def _dumps(obj: Any) -> bytes:
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


class RequestLog:
    """Appends events to a JSONL file (created with its folder if missing)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(
        self,
        event: str,
        seq: int,
        path: str,
        model: str | None,
        body_sha256: str | None,
        status: int | None = None,
        fault: str | None = None,
        **extra: Any,
    ) -> None:
        """Write one event; ``extra`` carries what was received (params, messages, form)."""
        if self._fd is None:
            return
        record: dict[str, Any] = {
            "event": event,
            "seq": seq,
            "path": path,
            "model": model,
            "body_sha256": body_sha256,
            "status": status,
            "fault": fault,
            "ts": time.time(),
        }
        if extra:
            record.update(extra)
        os.write(self._fd, _dumps(record))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """All complete events in a log (a torn last line from a killed writer is skipped)."""
    events: list[dict[str, Any]] = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return events
    for line in text.splitlines():
        if line.strip():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events
