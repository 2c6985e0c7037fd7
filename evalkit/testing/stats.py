"""Counters served at /_stats: plain ints and dicts updated inline, no locks (one loop)."""

from __future__ import annotations

import time
from typing import Any


class Stats:
    """Requests by path and status, faults by kind, and in-flight/queued gauges with their peaks.

    ``in_flight`` counts requests holding a server slot (at most max_concurrency);
    ``queued`` those waiting for one. /_stats and /_reset_stats are not counted.
    """

    __slots__ = (
        "requests",
        "by_path",
        "by_status",
        "faults",
        "in_flight",
        "max_in_flight",
        "queued",
        "max_queued",
        "since",
    )

    def __init__(self) -> None:
        self.in_flight = 0
        self.queued = 0
        self.reset()

    def reset(self) -> None:
        """Zero the counters; the gauges keep their current values and peaks restart from them."""
        self.requests = 0
        self.by_path: dict[str, int] = {}
        self.by_status: dict[str, int] = {}
        self.faults: dict[str, int] = {}
        self.max_in_flight = self.in_flight
        self.max_queued = self.queued
        self.since = time.time()

    def count_request(self, path: str) -> None:
        self.requests += 1
        self.by_path[path] = self.by_path.get(path, 0) + 1

    def count_status(self, status: int) -> None:
        key = str(status)
        self.by_status[key] = self.by_status.get(key, 0) + 1

    def count_fault(self, kind: str) -> None:
        self.faults[kind] = self.faults.get(kind, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "by_path": dict(self.by_path),
            "by_status": dict(self.by_status),
            "faults": dict(self.faults),
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "queued": self.queued,
            "max_queued": self.max_queued,
            "since": self.since,
        }
