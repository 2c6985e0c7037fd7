"""Live progress: a rich display on a terminal, plain periodic lines otherwise (CI logs stay readable)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TextIO


@dataclass
class _Line:
    total: int | None = None
    done: int = 0
    failed: int = 0


class Progress:
    """Counts done/failed per engine x model; prints a summary line every ``interval`` seconds."""

    def __init__(self, stream: TextIO | None = None, interval: float = 10.0, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.interval = interval
        self.quiet = quiet
        self.lines: dict[tuple[str, str], _Line] = {}
        self.started = time.monotonic()
        self._last = self.started

    def __call__(self, engine: str, model: str, ok: bool) -> None:
        line = self.lines.setdefault((engine, model), _Line())
        line.done += 1
        if not ok:
            line.failed += 1
        now = time.monotonic()
        if not self.quiet and now - self._last >= self.interval:
            self._last = now
            self.stream.write(self.summary() + "\n")
            self.stream.flush()

    def summary(self) -> str:
        done = sum(line.done for line in self.lines.values())
        failed = sum(line.failed for line in self.lines.values())
        elapsed = max(time.monotonic() - self.started, 1e-9)
        return f"[evalkit] {done} answers ({failed} failed) in {elapsed:.1f} s, {done / elapsed:.1f}/s"
