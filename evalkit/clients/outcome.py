"""What a request ends as: a response or a failure with a reason, never an exception."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Outcome:
    """The end of one logical request (after retries, or from the store).

    ``text`` is the model's answer when ``failure`` is None. ``failure`` is a
    short reason class ("http_500", "timeout", "connection", "parse",
    "http_400", "endpoint_unavailable", ...) and ``error`` the detail (the
    server's message, never request headers).
    """

    text: str | None = None
    raw: dict[str, Any] | None = None
    failure: str | None = None
    error: str | None = None
    status: int | None = None
    latency: float = 0.0
    attempts: int = 0
    replica: str | None = None
    cached: bool = False
    usage: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failure is None


def failed(reason: str, error: str, *, status: int | None = None, attempts: int = 0, latency: float = 0.0, replica: str | None = None) -> Outcome:
    return Outcome(failure=reason, error=error, status=status, attempts=attempts, latency=latency, replica=replica)
